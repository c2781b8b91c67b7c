//! `dexlake.kernels`: the lake's answers over events held in memory, for engines that hand
//! dexlake a group of rows (Spark's `applyInArrow`): bars, the PnL tables, the latest prices
//! the PnL marks at, token metrics, each the query's answer over [`InMemory`] events (the same
//! code past the lake's reader, see `dexlake::query::InMemory`); and [`bars_plan`], what such
//! bars take from the lake besides its events.
//!
//! Events come in through the Arrow C stream interface: any object with
//! `__arrow_c_stream__` (a pyarrow `Table`, a polars `DataFrame`, ...) is imported with
//! polars' Arrow FFI, its buffers shared (numbers and timestamps are not copied; strings are
//! brought to polars' string views). Answers go out as [`FrameStream`]s. The work runs with
//! the GIL released.

use std::collections::BTreeMap;
use std::ffi::CStr;

use dexlake::analytics::ohlcv::Unfetched;
use dexlake::analytics::pnl::PnlTable;
use dexlake::analytics::{EventSource, TimeRange};
use dexlake::query::{InMemory, LakeQuery as _};
use polars::prelude::*;
use polars_arrow::array::{Array, StructArray, new_empty_array};
use polars_arrow::datatypes::ArrowDataType;
use polars_arrow::ffi::{ArrowArrayStream, ArrowArrayStreamReader};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods};

use crate::errors::IntoPy;
use crate::frames::FrameStream;
use crate::lake::{NativeLake, bars_of, instant, invalid, pnl_config, warnings_of};

/// A bars' plan: the ranges never fetched as (token, from µs, to µs), the warnings as (kind,
/// text) pairs, and the lake version.
type Plan = (Vec<(String, i64, i64)>, Vec<(&'static str, String)>, u64);

/// The capsule name the Arrow PyCapsule interface gives a stream.
const STREAM_CAPSULE: &CStr = c"arrow_array_stream";

/// The rows of `events`, any object with `__arrow_c_stream__` whose stream is of struct
/// arrays (a table's record batches), as one frame. The stream is moved out of its capsule
/// (the capsule keeps a released one) and read to its end.
fn import(events: &Bound<'_, PyAny>, what: &str) -> PyResult<DataFrame> {
    if !events.hasattr("__arrow_c_stream__")? {
        return Err(PyTypeError::new_err(format!(
            "{what}: expected an object with __arrow_c_stream__ (a pyarrow Table, a polars \
             DataFrame), got {}",
            events.get_type().name()?
        )));
    }
    let capsule = events.call_method0("__arrow_c_stream__")?;
    let capsule = capsule.cast::<PyCapsule>()?;
    let pointer = capsule.pointer_checked(Some(STREAM_CAPSULE))?;
    // SAFETY: a capsule named `arrow_array_stream` holds an `ArrowArrayStream` (the PyCapsule
    // interface); moving it out and leaving a released one behind is how a consumer takes it.
    let stream = unsafe {
        let place = pointer.as_ptr().cast::<ArrowArrayStream>();
        Box::new(std::ptr::replace(place, ArrowArrayStream::empty()))
    };
    // SAFETY: the stream follows the C stream interface (its producer's promise).
    let mut reader = unsafe { ArrowArrayStreamReader::try_new(stream) }
        .map_err(|e| PyValueError::new_err(format!("{what}: {e}")))?;
    let ArrowDataType::Struct(fields) = reader.field().dtype().clone() else {
        return Err(PyValueError::new_err(format!(
            "{what}: expected a stream of record batches (struct arrays)"
        )));
    };
    let mut chunks: Vec<Vec<Box<dyn Array>>> = vec![Vec::new(); fields.len()];
    let mut height = 0usize;
    // SAFETY: as above.
    while let Some(array) = unsafe { reader.next() } {
        let array = array.map_err(|e| PyValueError::new_err(format!("{what}: {e}")))?;
        let Some(batch) = array.as_any().downcast_ref::<StructArray>() else {
            return Err(PyValueError::new_err(format!(
                "{what}: expected a stream of record batches (struct arrays)"
            )));
        };
        height += batch.len();
        for (column, values) in chunks.iter_mut().zip(batch.values()) {
            column.push(values.clone());
        }
    }
    let columns = fields
        .iter()
        .zip(chunks)
        .map(|(field, mut arrays)| {
            if arrays.is_empty() {
                arrays.push(new_empty_array(field.dtype().clone()));
            }
            Series::try_from((field, arrays)).map(Column::from)
        })
        .collect::<PolarsResult<Vec<Column>>>()
        .map_err(|e| PyValueError::new_err(format!("{what}: {e}")))?;
    DataFrame::new(height, columns).map_err(|e| PyValueError::new_err(format!("{what}: {e}")))
}

/// The ranges never fetched, as (token, from µs, to µs) triples.
fn unfetched_of(ranges: Vec<(String, i64, i64)>) -> Unfetched {
    let mut out = Unfetched::new();
    for (token, from, to) in ranges {
        out.insert(&token, from, to);
    }
    out
}

/// The selection of a door's arguments (a list of tokens or a pool, each optional) and
/// `[start, end)` (µs, each optional), as the query over `frame`'s events; the query refuses
/// what the lake's query refuses (both a list and a pool, a blank address, an empty range).
fn in_memory<'a>(
    frame: &'a DataFrame,
    source: EventSource,
    (tokens, pool, start, end): Selected,
) -> dexlake::Result<InMemory<'a>> {
    let events = match source {
        EventSource::Swaps => InMemory::new().swaps(frame),
        EventSource::Trades => InMemory::new().trades(frame),
    };
    let events = match one_selection(tokens, pool)? {
        (Some(tokens), _) => events.tokens(tokens),
        (_, Some(pool)) => events.pool(pool),
        (None, None) => events,
    };
    let range = TimeRange {
        from: instant(start, "start")?,
        to: instant(end, "end")?,
    };
    Ok(events.range(range))
}

/// Tokens or a pool, or neither (every token); both are refused. An empty list of tokens
/// selects none, which is refused: give none for all.
fn one_selection(
    tokens: Option<Vec<String>>,
    pool: Option<String>,
) -> dexlake::Result<(Option<Vec<String>>, Option<String>)> {
    match (tokens, pool) {
        (Some(_), Some(_)) => Err(invalid("pool", "not with tokens: give tokens or a pool")),
        (Some(tokens), _) if tokens.is_empty() => Err(invalid(
            "tokens",
            "give at least one token, or none for all",
        )),
        selection => Ok(selection),
    }
}

/// A selection of events: tokens, pool, and the range's start and end (µs).
type Selected = (
    Option<Vec<String>>,
    Option<String>,
    Option<i64>,
    Option<i64>,
);

/// Bars of every selected token of `events` (swaps or trades, as `source` names them; every
/// token, or `select_tokens`, or the token of `pool`'s swaps, in `[start, end)`), as `dexlake
/// ohlcv` gives them of a lake holding these rows, with `data_end` (µs; by default the instant
/// after the latest selected event, at most `end`) and the `unfetched` ranges [`bars_plan`]
/// gives; with `tokens`, only their bars.
#[pyfunction]
#[pyo3(signature = (
    events, source, interval, ticks, base_volume, usd_volume, offset, closed, label, fill, tz,
    data_end, unfetched, tokens, select_tokens=None, pool=None, start=None, end=None
))]
#[allow(clippy::too_many_arguments)]
pub fn bars(
    py: Python<'_>,
    events: &Bound<'_, PyAny>,
    source: &str,
    interval: Option<i64>,
    ticks: Option<u64>,
    base_volume: Option<f64>,
    usd_volume: Option<f64>,
    offset: i64,
    closed: &str,
    label: &str,
    fill: &str,
    tz: Option<String>,
    data_end: Option<i64>,
    unfetched: Vec<(String, i64, i64)>,
    tokens: Option<Vec<String>>,
    select_tokens: Option<Vec<String>>,
    pool: Option<String>,
    start: Option<i64>,
    end: Option<i64>,
) -> PyResult<FrameStream> {
    let source: EventSource = source.parse().py(py)?;
    let shape = (interval, ticks, base_volume, usd_volume);
    let mut spec = bars_of(shape, offset, closed, label, fill, tz).py(py)?;
    if let Some(end) = instant(data_end, "data_end").py(py)? {
        spec = spec.data_end(end);
    }
    if !unfetched.is_empty() {
        spec = spec.unfetched(unfetched_of(unfetched));
    }
    let frame = import(events, "events")?;
    let selected = (select_tokens, pool, start, end);
    let answer =
        py.detach(|| in_memory(&frame, source, selected)?.bars(source, &spec, tokens.as_deref()));
    Ok(FrameStream::new(answer.py(py)?))
}

/// Checks the bars of these arguments as [`bars`] does and, with `split_seconds`, their split
/// by time (`Bars::split`: refused, naming `split_seconds`, where the bars' rule does not
/// allow it), before any row is read; whether they are time bars (on a grid: the end of the
/// data applies to them), not tick, volume or dollar bars.
#[pyfunction]
#[pyo3(signature = (
    interval, ticks, base_volume, usd_volume, offset, closed, label, fill, tz, split_seconds
))]
#[allow(clippy::too_many_arguments)]
pub fn bars_options(
    py: Python<'_>,
    interval: Option<i64>,
    ticks: Option<u64>,
    base_volume: Option<f64>,
    usd_volume: Option<f64>,
    offset: i64,
    closed: &str,
    label: &str,
    fill: &str,
    tz: Option<String>,
    split_seconds: Option<i64>,
) -> PyResult<bool> {
    let shape = (interval, ticks, base_volume, usd_volume);
    let bars = bars_of(shape, offset, closed, label, fill, tz).py(py)?;
    if let Some(seconds) = split_seconds {
        bars.split(seconds).py(py)?;
    }
    Ok(bars.is_time())
}

/// Which rows of `events` (swaps or trades) can hold the selected events (as [`bars`] selects
/// them), and with `split_seconds` the start (µs) of each row's part when the bars of these
/// options are split by time (`Bars::split`: refused, naming `split_seconds`, where the bars'
/// rule does not allow it); without it every part is 0. Two columns, `keep` and `part`, a row
/// each: the filter and the group key of rows on their way to their groups.
#[pyfunction]
#[pyo3(signature = (
    events, source, interval, ticks, base_volume, usd_volume, offset, closed, label, fill, tz,
    split_seconds, select_tokens, pool, start, end
))]
#[allow(clippy::too_many_arguments)]
pub fn bar_rows(
    py: Python<'_>,
    events: &Bound<'_, PyAny>,
    source: &str,
    interval: Option<i64>,
    ticks: Option<u64>,
    base_volume: Option<f64>,
    usd_volume: Option<f64>,
    offset: i64,
    closed: &str,
    label: &str,
    fill: &str,
    tz: Option<String>,
    split_seconds: Option<i64>,
    select_tokens: Option<Vec<String>>,
    pool: Option<String>,
    start: Option<i64>,
    end: Option<i64>,
) -> PyResult<FrameStream> {
    let source: EventSource = source.parse().py(py)?;
    let shape = (interval, ticks, base_volume, usd_volume);
    let split = split_seconds
        .map(|seconds| bars_of(shape, offset, closed, label, fill, tz)?.split(seconds))
        .transpose()
        .py(py)?;
    let frame = import(events, "events")?;
    let selected = (select_tokens, pool, start, end);
    let answer = py.detach(|| {
        let events = in_memory(&frame, source, selected)?;
        let keep = events.selected_rows(source)?;
        let part = match &split {
            Some(split) => events.bar_parts(source, split)?,
            None => vec![0; keep.len()],
        };
        DataFrame::new(
            keep.len(),
            vec![
                Column::new("keep".into(), keep),
                Column::new("part".into(), part),
            ],
        )
        .map_err(dexlake::Error::polars("building the rows' keys"))
    });
    Ok(FrameStream::new(answer.py(py)?))
}

/// The latest time (µs) of the selected events of `events` (token sides, as [`bars`] reads
/// them), or `None`.
#[pyfunction]
#[pyo3(signature = (events, source, select_tokens=None, pool=None, start=None, end=None))]
pub fn latest_event(
    py: Python<'_>,
    events: &Bound<'_, PyAny>,
    source: &str,
    select_tokens: Option<Vec<String>>,
    pool: Option<String>,
    start: Option<i64>,
    end: Option<i64>,
) -> PyResult<Option<i64>> {
    let source: EventSource = source.parse().py(py)?;
    let frame = import(events, "events")?;
    let selected = (select_tokens, pool, start, end);
    py.detach(|| in_memory(&frame, source, selected)?.latest_event(source))
        .py(py)
}

/// One PnL table of every wallet of `trades` (and of the `swaps` of wallets without trades),
/// as `dexlake pnl --all-wallets` gives it of a lake holding these rows; with `latest` (token →
/// latest price over the whole lake) the mark `latest` reads it instead of these rows' prices.
#[pyfunction]
#[pyo3(signature = (trades, swaps, method, mark, oversell, dust, table, latest))]
#[allow(clippy::too_many_arguments)]
pub fn pnl(
    py: Python<'_>,
    trades: &Bound<'_, PyAny>,
    swaps: Option<&Bound<'_, PyAny>>,
    method: &str,
    mark: &str,
    oversell: &str,
    dust: f64,
    table: &str,
    latest: Option<BTreeMap<String, f64>>,
) -> PyResult<FrameStream> {
    let table: PnlTable = table.parse().py(py)?;
    let config = pnl_config(method, mark, oversell, dust, false).py(py)?;
    let trades = import(trades, "trades")?;
    let swaps = swaps.map(|s| import(s, "swaps")).transpose()?;
    let answer = py.detach(|| {
        let mut events = InMemory::new().trades(&trades);
        if let Some(swaps) = &swaps {
            events = events.swaps(swaps);
        }
        events.pnl_table(&config, table, latest.as_ref())
    });
    Ok(FrameStream::new(answer.py(py)?))
}

/// The latest price of each token of the PnL's events of `trades` and `swaps`, with the
/// event-order key of the event that set it (`token_address`, `block_time`, `block_slot`,
/// `id`, `price`).
#[pyfunction]
#[pyo3(signature = (trades, swaps))]
pub fn latest_prices(
    py: Python<'_>,
    trades: &Bound<'_, PyAny>,
    swaps: Option<&Bound<'_, PyAny>>,
) -> PyResult<FrameStream> {
    let trades = import(trades, "trades")?;
    let swaps = swaps.map(|s| import(s, "swaps")).transpose()?;
    let answer = py.detach(|| {
        let mut events = InMemory::new().trades(&trades);
        if let Some(swaps) = &swaps {
            events = events.swaps(swaps);
        }
        events.latest_prices()
    });
    Ok(FrameStream::new(answer.py(py)?))
}

/// The window metrics of `token` from `trades`, as `dexlake token-metrics` gives them of a lake
/// holding these trades; `now` (µs) defaults to the latest trade of `trades`.
#[pyfunction]
#[pyo3(signature = (trades, token, windows, now))]
pub fn token_metrics(
    py: Python<'_>,
    trades: &Bound<'_, PyAny>,
    token: String,
    windows: Option<Vec<String>>,
    now: Option<i64>,
) -> PyResult<FrameStream> {
    let now = instant(now, "now").py(py)?;
    let trades = import(trades, "trades")?;
    let windows = windows.unwrap_or_default();
    let answer = py.detach(|| {
        let windows: Vec<&str> = windows.iter().map(String::as_str).collect();
        InMemory::new()
            .trades(&trades)
            .token_metrics(&token, &windows, now)
    });
    Ok(FrameStream::new(answer.py(py)?))
}

/// What bars of `lake`'s events computed in groups take from the lake: the ranges never
/// fetched of the selection (`tokens`, a `pool`, or every token, in `[start, end)`), as
/// (token, from µs, to µs), the answer's warnings and the lake version (`Query::bars_plan`).
#[pyfunction]
#[pyo3(signature = (lake, source, tokens, start, end, strict, pool=None))]
#[allow(clippy::too_many_arguments)]
pub fn bars_plan(
    py: Python<'_>,
    lake: &NativeLake,
    source: &str,
    tokens: Option<Vec<String>>,
    start: Option<i64>,
    end: Option<i64>,
    strict: bool,
    pool: Option<String>,
) -> PyResult<Plan> {
    let (start, end) = (instant(start, "start").py(py)?, instant(end, "end").py(py)?);
    let answer = py.detach(|| {
        let mut query = lake.lake.query().strict(strict).source(source.parse()?);
        match one_selection(tokens, pool)? {
            (Some(tokens), _) => query = query.tokens(tokens),
            (_, Some(pool)) => query = query.pool(pool),
            (None, None) => {}
        }
        if let Some(start) = start {
            query = query.since(start);
        }
        if let Some(end) = end {
            query = query.until(end);
        }
        // The plan does not depend on the bars' shape: every time option takes the same ranges.
        query.bars_plan(dexlake::query::Bars::every(60))
    });
    let answer = answer.py(py)?;
    let ranges = answer
        .value
        .options()
        .unfetched
        .iter()
        .flat_map(|(t, r)| r.iter().map(move |&(a, b)| (t.to_owned(), a, b)))
        .collect();
    Ok((ranges, warnings_of(&answer.warnings), answer.version))
}
