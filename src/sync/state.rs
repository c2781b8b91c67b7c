//! Sync states: the progress each job records in the lake's manifest (cursors, covered ranges,
//! snapshot chunks), read from the run's copy during a run and from the lake otherwise.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::lake::Lake;

/// Every sync state of a lake, as a run found them at its start.
pub(crate) type StateMap = BTreeMap<String, Value>;

/// The sync states a run read once at its start, so that thousands of jobs do not each read
/// the manifest. A job's own keys change only by its own commits, so the copy is its state at
/// its start; runs overlapping on one `Syncer` may see an older state, which makes them fetch
/// again rows the lake already holds, never skip any.
#[derive(Debug, Default)]
pub(crate) struct RunStates {
    current: Mutex<Option<Arc<StateMap>>>,
}

impl RunStates {
    /// Sets (a run starts) or clears (a run ended) the copy.
    pub(crate) fn set(&self, states: Option<Arc<StateMap>>) {
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = states;
    }

    fn get(&self) -> Option<Arc<StateMap>> {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Reads sync states: from the run's copy while there is one, from the lake otherwise.
#[derive(Clone, Copy)]
pub(crate) struct SyncStates<'a> {
    pub(crate) lake: &'a Lake,
    pub(crate) run: &'a RunStates,
}

impl SyncStates<'_> {
    /// Every sync state whose key starts with `prefix`.
    pub(crate) fn with_prefix(&self, prefix: &str) -> Result<StateMap> {
        match self.run.get() {
            Some(all) => Ok(all
                .range(prefix.to_owned()..)
                .take_while(|(k, _)| k.starts_with(prefix))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()),
            None => self.lake.states(prefix),
        }
    }

    /// The sync state recorded under `key`, if any.
    pub(crate) fn read<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
        let value = match self.run.get() {
            Some(all) => all.get(key).cloned(),
            None => self.lake.state(key)?,
        };
        match value {
            None | Some(Value::Null) => Ok(None),
            Some(v) => self.decode(key, v).map(Some),
        }
    }

    /// Decodes the sync state recorded under `key`.
    pub(crate) fn decode<T: DeserializeOwned>(&self, key: &str, value: Value) -> Result<T> {
        serde_json::from_value(value).map_err(|source| Error::LakeDecode {
            path: self.lake.root().to_path_buf(),
            what: format!("sync state {key} is not valid"),
            source,
        })
    }
}

/// A sync state as the JSON value the manifest records.
pub(crate) fn state_value<T: Serialize>(state: &T) -> Value {
    serde_json::to_value(state).expect("sync state types serialise to JSON")
}
