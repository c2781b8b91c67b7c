//! Sync: incremental, resumable fetch of datasets into the lake.
