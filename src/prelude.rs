//! The names research code uses most, for `use dexlake::prelude::*;`: the lake, the query
//! entry and its options, sync, and polars' two frames.
//!
//! ```no_run
//! use dexlake::prelude::*;
//!
//! # fn demo() -> dexlake::Result<()> {
//! let lake = Lake::open_existing("./lake")?;
//! let bars: DataFrame = lake.query().trades().bars(Bars::every(300))?;
//! # let _ = bars; Ok(()) }
//! ```

pub use crate::analytics::pnl::{
    CostMethod, EquityConfig, Mark, OversellPolicy, PnlConfig, PnlTable,
};
pub use crate::analytics::screener::ProfileSnapshot;
pub use crate::analytics::{BarOptions, BarRule, Edge, EventSource, Fill, LiveBars, TimeRange};
pub use crate::api::profile_query::SearchRequest;
pub use crate::api::{Client, ClientConfig};
pub use crate::lake::{Dataset, Lake, LakeOptions};
pub use crate::query::{Answer, Bars, LakeQuery, Query, Warning, WarningKind};
pub use crate::search::SearchPage;
pub use crate::sync::{Job, SyncConfig, Syncer};
pub use crate::{Error, ErrorKind, Result};
pub use polars::prelude::{DataFrame, LazyFrame};
