//! Scripts that define, for another engine, one view per dataset over exactly the files one
//! version of the lake commits (`dexlake views`): DuckDB SQL (`duckdb -init views.sql`) or a
//! PySpark script. A glob of a dataset's folder reads every Parquet file in it, committed or
//! not (the files compactions replaced, kept for older versions until a vacuum; a moment during
//! a commit; after a crash); these views read the manifest's list of the handle's version.
//!
//! Every path is absolute (a local lake's root is made absolute against the working folder),
//! so the script runs from any folder; an object store's files are `s3://` URLs for DuckDB
//! (with its `httpfs` extension and credentials) and `s3a://` for Spark (hadoop-aws).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use super::scan::locations;
use crate::lake::base::Base;
use crate::lake::{Dataset, Manifest};
use crate::{Error, Result};

/// The engine a views script is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ViewEngine {
    /// DuckDB SQL: `CREATE OR REPLACE VIEW <dataset> AS SELECT * FROM read_parquet([...])`.
    #[default]
    Duckdb,
    /// A PySpark script: `spark.read.option("basePath", ...).parquet(...)`, registered as a
    /// temporary view per dataset.
    Spark,
}

impl ViewEngine {
    /// The engines' names, as `--engine` takes them.
    pub const NAMES: [&'static str; 2] = ["duckdb", "spark"];
}

impl FromStr for ViewEngine {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "duckdb" => Ok(ViewEngine::Duckdb),
            "spark" => Ok(ViewEngine::Spark),
            other => Err(Error::InvalidArgument {
                argument: "engine".into(),
                reason: format!(
                    "{other:?} is not an engine of the views (expected one of: {})",
                    ViewEngine::NAMES.join(", ")
                ),
            }),
        }
    }
}

/// `path` as the engine opens it: absolute for a local file, `s3a://` for Spark on S3.
fn engine_location(path: &Path, engine: ViewEngine) -> Result<String> {
    let text = path.to_string_lossy();
    if let Some(rest) = text.strip_prefix("s3://") {
        return Ok(match engine {
            ViewEngine::Duckdb => text.into_owned(),
            ViewEngine::Spark => format!("s3a://{rest}"),
        });
    }
    let absolute: PathBuf = std::path::absolute(path).map_err(|source| Error::Io {
        action: "resolving",
        path: path.to_owned(),
        source,
    })?;
    Ok(absolute.to_string_lossy().into_owned())
}

/// A SQL string literal.
fn sql_text(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// A Python string literal (a JSON string is one).
fn python_text(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

/// The views script of `manifest`'s committed files, for `engine`. Each file is checked
/// against its manifest entry's size first, as a scan checks it.
pub(crate) fn views_script(lake: &Base, manifest: &Manifest, engine: ViewEngine) -> Result<String> {
    let root = engine_location(&lake.store().location(""), engine)?;
    let root = root.trim_end_matches('/');
    let version = manifest.version;
    let mut out = String::new();
    match engine {
        ViewEngine::Duckdb => {
            let _ = writeln!(
                out,
                "-- The committed files of the dexlake lake {root} at version {version}, one \
                 view per dataset.\n-- Run: duckdb -init views.sql (a glob of the dataset \
                 folders would also read files no commit holds)."
            );
            if root.starts_with("s3://") {
                out.push_str(
                    "-- The files are on S3: INSTALL httpfs; LOAD httpfs; and a secret with \
                     the bucket's credentials (CREATE SECRET).\n",
                );
            }
        }
        ViewEngine::Spark => {
            let _ = writeln!(
                out,
                "# The committed files of the dexlake lake {root} at version {version}, one \
                 temporary view per dataset.\n# Run with spark-submit, or paste into pyspark \
                 (a glob of the dataset folders would also read files no commit holds).\n\
                 from pyspark.sql import SparkSession\n\n\
                 spark = SparkSession.builder.getOrCreate()\nLAKE = {}",
                python_text(root)
            );
        }
    }
    for dataset in Dataset::ALL {
        let files = locations(lake, manifest, dataset)?
            .iter()
            .map(|p| engine_location(p, engine))
            .collect::<Result<Vec<String>>>()?;
        let name = dataset.name();
        if files.is_empty() {
            let comment = if engine == ViewEngine::Duckdb {
                "--"
            } else {
                "#"
            };
            let _ = writeln!(out, "{comment} {name}: no committed files, no view");
            continue;
        }
        match engine {
            ViewEngine::Duckdb => {
                let list: Vec<String> =
                    files.iter().map(|f| format!("  {}", sql_text(f))).collect();
                let _ = writeln!(
                    out,
                    "CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_parquet([\n{}\n], \
                     hive_partitioning = true, union_by_name = true);",
                    list.join(",\n")
                );
            }
            ViewEngine::Spark => {
                let list: Vec<String> = files
                    .iter()
                    .map(|f| format!("    {},", python_text(f)))
                    .collect();
                let _ = writeln!(
                    out,
                    "spark.read.option(\"basePath\", LAKE).option(\"mergeSchema\", \"true\").parquet(\n{}\n).createOrReplaceTempView({})",
                    list.join("\n"),
                    python_text(name)
                );
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_parse_and_an_unknown_one_is_named() {
        assert_eq!("duckdb".parse::<ViewEngine>().unwrap(), ViewEngine::Duckdb);
        assert_eq!("spark".parse::<ViewEngine>().unwrap(), ViewEngine::Spark);
        let e = "trino".parse::<ViewEngine>().unwrap_err().to_string();
        assert!(e.contains("trino") && e.contains("duckdb, spark"), "{e}");
    }

    #[test]
    fn literals_are_quoted_for_each_language() {
        assert_eq!(sql_text("a'b"), "'a''b'");
        assert_eq!(python_text("a\"b\\c"), "\"a\\\"b\\\\c\"");
    }

    #[test]
    fn s3_files_are_s3a_for_spark_only() {
        let p = Path::new("s3://bucket/lake/swaps/x.parquet");
        assert_eq!(
            engine_location(p, ViewEngine::Duckdb).unwrap(),
            "s3://bucket/lake/swaps/x.parquet"
        );
        assert_eq!(
            engine_location(p, ViewEngine::Spark).unwrap(),
            "s3a://bucket/lake/swaps/x.parquet"
        );
        assert!(
            Path::new(&engine_location(Path::new("lake/a.parquet"), ViewEngine::Duckdb).unwrap())
                .is_absolute()
        );
    }
}
