//! `dexlake schema`, `views`, `verify`, `compact`, `vacuum` and the hidden `fixture-lake`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use dexlake::error::printable;
use dexlake::lake::{
    Dataset, Lake, LakeOptions, VacuumOptions, VerifyOptions, VerifyProgress, ViewEngine, docs,
    sample::Samples,
};

use crate::Global;
use crate::open_lake::{AsOfArg, reading_lake};
use crate::open_lake::{ensure_lake, existing_lake};

/// Arguments of `dexlake schema`.
#[derive(Args, Debug)]
pub struct SchemaArgs {
    /// Dataset name; all datasets when omitted.
    pub dataset: Option<String>,
    /// Print the whole of docs/datasets.md instead.
    #[arg(long)]
    pub markdown: bool,
}

/// Arguments of `dexlake views`.
#[derive(Args, Debug)]
pub struct ViewsArgs {
    /// The engine of the script: `duckdb` (SQL for `duckdb -init views.sql`) or `spark` (a
    /// PySpark script).
    #[arg(long, default_value = "duckdb")]
    pub engine: String,
    #[command(flatten)]
    pub as_of: AsOfArg,
}

/// Arguments of `dexlake verify`.
#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// When the manifest is missing or damaged, first rebuild it from the data files on disk
    /// (their metadata and partition paths), listing the files it could not account for.
    #[arg(long)]
    pub repair: bool,
    /// Seconds `--repair` waits for another writer to release the lake (default 10). The
    /// check itself never waits for writers.
    #[arg(long, value_name = "SECONDS", value_parser = crate::lock_timeout_secs)]
    pub lock_timeout: Option<Duration>,
    /// Decode every page of every committed file (all columns, all row groups) and count its
    /// rows, reporting each file whose pages do not decode: the default, which adds about a
    /// sixth to the check's time (BENCHMARKS.md); with this flag, progress lines also go to
    /// stderr when it is not a terminal.
    #[arg(long, conflicts_with = "quick")]
    pub deep: bool,
    /// Skip the page decoding: check each file's footer and key columns only.
    #[arg(long)]
    pub quick: bool,
}

/// Arguments of `dexlake compact`.
#[derive(Args, Debug)]
pub struct CompactArgs {
    /// Seconds to wait for another writer to release the lake (default 10).
    #[arg(long, value_name = "SECONDS", value_parser = crate::lock_timeout_secs)]
    pub lock_timeout: Option<Duration>,
}

/// Arguments of `dexlake vacuum`.
#[derive(Args, Debug)]
pub struct VacuumArgs {
    /// Keep every version committed within this time before now readable (`--as-of`), and the
    /// last one before it: `7d`, `12h`, `30m`, `0s` (only the newest version).
    #[arg(long, value_name = "DURATION", default_value = "7d", value_parser = retention)]
    pub retain: Duration,
    /// Print what would be deleted; delete nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Seconds to wait for another writer to release the lake (default 10).
    #[arg(long, value_name = "SECONDS", value_parser = crate::lock_timeout_secs)]
    pub lock_timeout: Option<Duration>,
}

/// Parses `--retain`: a duration such as `7d`, `12h 30m` or `0s`.
fn retention(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|e| format!("{e}; give a duration such as 7d, 12h, 30m or 0s"))
}

/// Lake options with the `--lock-timeout` of a command, if given.
fn options(lock_timeout: Option<Duration>) -> LakeOptions {
    let defaults = LakeOptions::default();
    LakeOptions {
        lock_timeout: lock_timeout.unwrap_or(defaults.lock_timeout),
        ..defaults
    }
}

/// Arguments of `dexlake fixture-lake`.
#[derive(Args, Debug)]
pub struct FixtureLakeArgs {
    /// Folder of the lake to write (created if missing).
    pub dir: PathBuf,
    /// Swaps and trades to write; the other datasets scale with it.
    #[arg(long, default_value_t = 200)]
    pub rows: usize,
    /// Seed of the sample records.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Also write the sample records as JSON to this file.
    #[arg(long)]
    pub records: Option<PathBuf>,
}

/// `dexlake views`: the script of one view per dataset over the committed files.
pub fn views(global: &Global, args: ViewsArgs) -> anyhow::Result<ExitCode> {
    let engine: ViewEngine = args.engine.parse()?;
    let lake = reading_lake(global, &args.as_of)?;
    print!("{}", lake.views(engine)?);
    Ok(ExitCode::SUCCESS)
}

pub fn schema(_global: &Global, args: SchemaArgs) -> anyhow::Result<ExitCode> {
    if args.markdown {
        print!("{}", docs::markdown());
        return Ok(ExitCode::SUCCESS);
    }
    let datasets = match args.dataset {
        Some(name) => vec![name.parse::<Dataset>()?],
        None => Dataset::ALL.to_vec(),
    };
    for (i, dataset) in datasets.into_iter().enumerate() {
        if i > 0 {
            println!();
        }
        println!("{dataset}");
        println!("  {}", docs::dataset_summary(dataset));
        let cols = docs::column_docs(dataset);
        let wp = cols.iter().map(|c| c.path.len()).max().unwrap_or(0);
        let wt = cols.iter().map(|c| c.type_name.len()).max().unwrap_or(0);
        let wu = cols.iter().map(|c| c.unit.len()).max().unwrap_or(0);
        for c in cols {
            println!(
                "  {:wp$}  {:wt$}  {:wu$}  {}",
                c.path, c.type_name, c.unit, c.meaning
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn verify(global: &Global, args: VerifyArgs) -> anyhow::Result<ExitCode> {
    if args.repair {
        ensure_lake(global)?;
        let report = Lake::repair_with(&global.lake, options(args.lock_timeout))
            .with_context(|| format!("repairing the lake {}", global.lake.display()))?;
        if report.rebuilt {
            let rows: u64 = report.rows.values().sum();
            println!(
                "rebuilt the manifest (version {}) from {} files, {} rows; sync state {}",
                report.version,
                report.files,
                rows,
                if report.state_from_previous {
                    "taken from the previous manifest version"
                } else {
                    "empty (the next sync fetches everything again and adds nothing twice)"
                }
            );
            if !report.left_out.is_empty() {
                println!(
                    "not accounted for ({} files, left on disk):",
                    report.left_out.len()
                );
                for (path, why) in &report.left_out {
                    println!("  {}: {}", printable(path), printable(why));
                }
            }
        } else {
            println!("the manifest is sound; nothing to rebuild");
        }
    }
    let lake = existing_lake(global)?;
    let report = if !args.quick {
        let progress = PagesProgress::new(args.deep);
        let report = lake.verify_with(&VerifyOptions { deep: true }, &|p| progress.show(p));
        progress.finish();
        report?
    } else {
        lake.verify()?
    };
    let rec = &report.recovery;
    if !rec.is_empty() {
        println!(
            "cleaned up an interrupted commit: {} uncommitted files, {} vacuumed files, {} temporary files",
            rec.rolled_back.len(),
            rec.finished.len(),
            rec.temps.len()
        );
    }
    let rows: u64 = report.rows.values().sum();
    println!(
        "manifest version {}: {} files, {} rows",
        report.version, report.files_checked, rows
    );
    for (dataset, n) in &report.rows {
        println!("  {dataset}: {n} rows");
    }
    if report.retained > 0 {
        println!(
            "{} replaced files retained for older versions (not committed; `dexlake vacuum` deletes them)",
            report.retained
        );
    }
    if !report.unreferenced.is_empty() {
        println!(
            "{} data files no commit references (a commit in progress, or one interrupted or taken over by another writer); readers never see them",
            report.unreferenced.len()
        );
    }
    if report.is_ok() {
        println!("ok");
        Ok(ExitCode::SUCCESS)
    } else {
        for p in &report.problems {
            println!("problem: {p}");
        }
        println!("{} problems", report.problems.len());
        Ok(ExitCode::FAILURE)
    }
}

pub fn compact(global: &Global, args: CompactArgs) -> anyhow::Result<ExitCode> {
    let lake = existing_lake(global)?.with_options(options(args.lock_timeout));
    let report = lake.compact()?;
    println!(
        "compacted {} partitions: {} files replaced by {}",
        report.partitions, report.files_removed, report.files_added
    );
    if report.files_removed > 0 {
        println!(
            "the replaced files stay for the older versions until `dexlake vacuum` deletes them"
        );
    }
    for (dataset, n) in &report.rows {
        println!("  {dataset}: {n} rows rewritten");
    }
    Ok(ExitCode::SUCCESS)
}

pub fn vacuum(global: &Global, args: VacuumArgs) -> anyhow::Result<ExitCode> {
    let lake = existing_lake(global)?.with_options(options(args.lock_timeout));
    let report = lake.vacuum(VacuumOptions {
        retain: args.retain,
        dry_run: args.dry_run,
    })?;
    let verb = if report.dry_run {
        "would delete"
    } else {
        "deleted"
    };
    if report.dry_run {
        for (path, bytes) in &report.files {
            println!("{path}\t{bytes}");
        }
    }
    println!(
        "{verb} {} replaced files ({} bytes) and {} log files; versions from {} on stay readable; {} replaced files retained for them",
        report.files.len(),
        report.bytes(),
        report.log_files,
        report.oldest_version,
        report.retained
    );
    if let Some(v) = report.version {
        println!("committed as version {v}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes deterministic samples of every dataset through the real writer (in two commits, so
/// partitions hold more than one file) and prints the row counts as JSON.
pub fn fixture_lake(_global: &Global, args: FixtureLakeArgs) -> anyhow::Result<ExitCode> {
    let lake = Lake::open(&args.dir)
        .with_context(|| format!("opening the lake {}", args.dir.display()))?;
    let samples = Samples::generate(args.seed, args.rows);
    if let Some(path) = &args.records {
        let json = serde_json::to_vec(&samples)?;
        std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))?;
    }
    let batches = samples.batches()?;
    let (first, second) = batches.split_at(batches.len() / 2);
    for part in [first, second] {
        let mut tx = lake.transaction()?;
        for (dataset, batch) in part {
            tx.write(*dataset, batch.clone())?;
        }
        tx.commit()?;
    }
    let counts: serde_json::Map<String, serde_json::Value> = Dataset::ALL
        .iter()
        .map(|d| Ok((d.name().to_owned(), lake.row_count(*d)?.into())))
        .collect::<dexlake::Result<_>>()?;
    println!("{}", serde_json::Value::Object(counts));
    Ok(ExitCode::SUCCESS)
}

/// The progress of the page decoding on stderr: a bar of the bytes decoded on a terminal,
/// otherwise, when `--deep` was asked for, a line at each tenth of the files.
struct PagesProgress {
    bar: Option<indicatif::ProgressBar>,
    /// Whether to print lines when stderr is not a terminal.
    lines: bool,
    /// The last tenth of the files a line was printed for.
    tenth: std::sync::atomic::AtomicUsize,
}

impl PagesProgress {
    fn new(lines: bool) -> Self {
        use std::io::IsTerminal;
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new(0);
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:30}] {bytes}/{total_bytes} decoded  {msg}  eta {eta}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        PagesProgress {
            bar,
            lines,
            tenth: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    fn show(&self, p: VerifyProgress) {
        if let Some(bar) = &self.bar {
            bar.set_length(p.bytes);
            bar.set_position(p.bytes_done);
            bar.set_message(format!("{}/{} files", p.files_done, p.files));
            return;
        }
        if !self.lines {
            return;
        }
        let tenth = (p.files_done * 10).checked_div(p.files).unwrap_or(10);
        let before = self
            .tenth
            .fetch_max(tenth, std::sync::atomic::Ordering::Relaxed);
        if tenth > before || p.files_done == 0 {
            eprintln!(
                "decoding pages: {}/{} files, {} of {} MB",
                p.files_done,
                p.files,
                p.bytes_done / 1_000_000,
                p.bytes / 1_000_000
            );
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
