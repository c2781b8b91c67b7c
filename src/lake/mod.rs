//! The lake: hive-partitioned Parquet with a transactional manifest.
