//! [`Query::sql`]: a SQL query over the lake, run by polars' SQL (`polars::sql`), every dataset
//! a table of exactly the files one version of the lake commits.
//!
//! Each dataset is a table named by the dataset's name (`swaps`, `trades`, `candles`,
//! `price_history`, `prices`, `price_stats`, `token_profiles`, `portfolios`, and the `bars`
//! that `dexlake follow` writes), read as the lake's other scans read it: the committed files
//! of the manifest the handle reads (never a glob of the folder), with the hive columns
//! `chain`, `interval` (candles, price history) and `date`. A dataset without committed files
//! is an empty table with its columns. A nested struct's fields are reached by path: `SELECT
//! market.price FROM token_profiles`, and a field whose name is not an identifier is quoted:
//! `metrics."1d".volume`. Table names are matched as SQL matches them: unquoted in any case,
//! quoted exactly. The hive column `interval` is a SQL keyword: quote it (`"interval"`).
//!
//! Times are `timestamp[us, UTC]`, and polars' SQL compares them with a zoned value only: `WHERE
//! block_time >= date('2025-05-01')`, `block_time >= strptime('2025-05-01 06:00:00+0000',
//! '%Y-%m-%d %H:%M:%S%z')` or `extract(epoch from block_time) >= 1746079200` work, a literal
//! without a zone (`timestamp '2025-05-01 06:00:00'`) is refused by polars.
//!
//! The statement is parsed (by `sqlparser`, with the dialect and options polars' SQL uses)
//! and classified before anything is read: only one query is run (`SELECT`, `WITH`, `VALUES`,
//! set operations such as `UNION`); several statements, a statement that is not a query
//! (`CREATE`, `DROP`, `INSERT`, `DELETE`, `COPY`, `EXPLAIN`, `SHOW`, ...), `SELECT ... INTO`,
//! a table function (`read_parquet('...')`, which would read files no commit holds) and a
//! table that is neither a dataset nor a `WITH` name are refused with one line naming why.
//! Only the datasets the query names are read. A query polars cannot plan or run (an unknown
//! column, a type mismatch) is refused with the first line of polars' message. All of these
//! are [`Error::InvalidArgument`] (argument `SQL query`); a damaged committed file is named as
//! by every other read.
//!
//! The answer carries the lake version read and an empty coverage: SQL reads the committed
//! rows as they are, not what the syncs fetched.

use std::collections::BTreeSet;
use std::ops::ControlFlow;

use polars::prelude::*;
use polars::sql::SQLContext;
use sqlparser::ast::{
    Ident, ObjectName, ObjectNamePart, Query as SqlQuery, Select, Statement, TableFactor, Visit,
    Visitor,
};
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::{Parser, ParserOptions};

use super::answer::Answer;
use super::{Query, refused};
use crate::coverage::Coverage;
use crate::lake::Dataset;
use crate::lake::base::Base;
use crate::lake::read::{name_damaged_file, scan};
use crate::{Error, Result};

/// The argument every refusal of a SQL query names.
const ARGUMENT: &str = "SQL query";

impl Query<'_> {
    /// The rows a SQL query (polars' SQL dialect) selects from the lake's datasets, each a
    /// table of its committed files at the version the handle reads (see the module's
    /// documentation for the tables, the struct paths and what is refused). The answer carries
    /// that version and an empty coverage; an empty result is an answer, not an error.
    ///
    /// The query is the whole selection: a token, pool, wallet, time range or series given to
    /// this [`Query`] is refused.
    pub fn sql(&self, query: &str) -> Result<Answer<DataFrame>> {
        self.no_sql_selection()?;
        let statement = Checked::parse(query)?;
        let manifest = self.lake.snapshot()?;
        let base = self.lake.base();
        let mut context = SQLContext::new();
        for (name, dataset) in &statement.tables {
            context.register(name, scan(base, &manifest, *dataset)?);
        }
        // Planning reads the footers of the files (their schema), running reads the rest. The
        // in-memory engine, not the streaming one: the streaming engine's float sums change
        // from run to run, and a pinned read must answer the same bytes (BENCHMARKS.md, "SQL").
        let failed = |e| failure(base, &statement, e);
        let value = context
            .execute(query)
            .and_then(LazyFrame::collect)
            .map_err(failed)?;
        Ok(Answer {
            value,
            coverage: Coverage {
                dataset: statement.datasets().next().unwrap_or(Dataset::Swaps),
                targets: Vec::new(),
                notes: Vec::new(),
            },
            warnings: Vec::new(),
            version: manifest.version,
        })
    }

    /// A SQL query selects its rows itself: a token, pool, wallet, range or series is refused.
    fn no_sql_selection(&self) -> Result<()> {
        let range = self.range.from.is_some() || self.range.to.is_some();
        if self.tokens.is_some()
            || self.pool.is_some()
            || self.wallets.is_some()
            || range
            || self.series.is_some()
            || self.series_interval.is_some()
        {
            return Err(refused(
                "selection",
                "a SQL query selects its rows itself: select no token, pool, wallet, range or series",
            ));
        }
        Ok(())
    }
}

/// What a failed plan or run of a query is: the query's fault (one line of polars' message)
/// unless a committed file it read is damaged, which is named as every read names it.
fn failure(base: &Base, statement: &Checked, e: PolarsError) -> Error {
    if let PolarsError::SQLInterface(_)
    | PolarsError::SQLSyntax(_)
    | PolarsError::ColumnNotFound(_)
    | PolarsError::StructFieldNotFound(_)
    | PolarsError::SchemaFieldNotFound(_)
    | PolarsError::SchemaMismatch(_)
    | PolarsError::InvalidOperation(_)
    | PolarsError::Duplicate(_) = root_cause(&e)
    {
        return query_error(e);
    }
    for dataset in statement.datasets() {
        let error = Error::polars("running a SQL query")(e.clone());
        if let named @ Error::DamagedLake { .. } = name_damaged_file(base, dataset, error) {
            return named;
        }
    }
    match root_cause(&e) {
        PolarsError::IO { .. } => Error::polars("running a SQL query")(e),
        _ => query_error(e),
    }
}

/// The error under polars' context wrappers.
fn root_cause(e: &PolarsError) -> &PolarsError {
    match e {
        PolarsError::Context { error, .. } | PolarsError::ExprContext { error, .. } => {
            root_cause(error)
        }
        other => other,
    }
}

/// A query polars refused, as one line: the first line of its message (polars follows some
/// with the plan it was resolving).
fn query_error(e: PolarsError) -> Error {
    let text = e.to_string();
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("polars refused it");
    refused(ARGUMENT, line.to_owned())
}

/// A parsed query that may run: the tables it names, each with the dataset it reads.
struct Checked {
    /// Each name the query uses for a dataset (as written, unquoted ones lowercased to
    /// compare), with the dataset.
    tables: Vec<(String, Dataset)>,
}

impl Checked {
    /// Parses `query` and refuses what is not one read of known tables.
    fn parse(query: &str) -> Result<Self> {
        let statements = Parser::new(&GenericDialect)
            .with_options(ParserOptions::new().with_trailing_commas(true))
            .try_with_sql(query)
            .and_then(|mut p| p.parse_statements())
            .map_err(|e| refused(ARGUMENT, format!("cannot parse it: {e}")))?;
        let statement = match statements.as_slice() {
            [one] => one,
            [] => return Err(refused(ARGUMENT, "it is empty: give one SELECT query")),
            many => {
                return Err(refused(
                    ARGUMENT,
                    format!(
                        "it holds {} statements: give one query at a time",
                        many.len()
                    ),
                ));
            }
        };
        let mut check = Check::default();
        if let ControlFlow::Break(e) = statement.visit(&mut check) {
            return Err(e);
        }
        let mut tables = Vec::new();
        for name in &check.relations {
            if check.ctes.contains(&name.compared) {
                continue;
            }
            match Dataset::ALL.into_iter().find(|d| d.name() == name.compared) {
                Some(d) => {
                    if !tables.iter().any(|(n, _)| *n == name.written) {
                        tables.push((name.written.clone(), d));
                    }
                }
                None => {
                    let names: Vec<&str> = Dataset::ALL.iter().map(|d| d.name()).collect();
                    return Err(refused(
                        ARGUMENT,
                        format!(
                            "no table {}; the lake's tables are {}",
                            name.shown,
                            names.join(", ")
                        ),
                    ));
                }
            }
        }
        Ok(Checked { tables })
    }

    /// The datasets the query reads, each once, in the order it names them.
    fn datasets(&self) -> impl Iterator<Item = Dataset> + '_ {
        let mut seen = BTreeSet::new();
        self.tables
            .iter()
            .map(|(_, d)| *d)
            .filter(move |d| seen.insert(*d))
    }
}

/// A table name of the query.
struct Relation {
    /// As polars looks it up.
    written: String,
    /// As it is compared with the datasets and `WITH` names: unquoted names lowercased.
    compared: String,
    /// As the refusal shows it.
    shown: String,
}

/// The walk over a statement that refuses what is not a read and collects the names of its
/// tables and of its `WITH` clauses.
#[derive(Default)]
struct Check {
    relations: Vec<Relation>,
    ctes: BTreeSet<String>,
}

/// How SQL compares an identifier: a quoted one as written, an unquoted one in any case.
fn compared(ident: &Ident) -> String {
    match ident.quote_style {
        Some(_) => ident.value.clone(),
        None => ident.value.to_lowercase(),
    }
}

impl Visitor for Check {
    type Break = Error;

    fn pre_visit_statement(&mut self, statement: &Statement) -> ControlFlow<Error> {
        if let Statement::Query(_) = statement {
            return ControlFlow::Continue(());
        }
        // The statement's first words name it (`INSERT INTO`, `CREATE TABLE`, `COPY`).
        let text = statement.to_string();
        let what: Vec<&str> = text.split_whitespace().take(2).collect();
        ControlFlow::Break(refused(
            ARGUMENT,
            format!(
                "{} is not a query: SQL over the lake only reads (SELECT, WITH, VALUES, UNION ...), it never writes or changes anything",
                what.join(" ")
            ),
        ))
    }

    fn pre_visit_query(&mut self, query: &SqlQuery) -> ControlFlow<Error> {
        if let Some(with) = &query.with {
            self.ctes
                .extend(with.cte_tables.iter().map(|c| compared(&c.alias.name)));
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_select(&mut self, select: &Select) -> ControlFlow<Error> {
        match &select.into {
            Some(into) => ControlFlow::Break(refused(
                ARGUMENT,
                format!(
                    "SELECT INTO {} writes a table: SQL over the lake only reads",
                    into.name
                ),
            )),
            None => ControlFlow::Continue(()),
        }
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<Error> {
        match factor {
            TableFactor::Table {
                name,
                args: Some(_),
                ..
            } => ControlFlow::Break(refused(
                ARGUMENT,
                format!(
                    "{name}(...) is a table function: a query reads the lake's tables only (a file \
                     reader such as read_parquet would read files no commit holds)"
                ),
            )),
            _ => ControlFlow::Continue(()),
        }
    }

    fn pre_visit_relation(&mut self, name: &ObjectName) -> ControlFlow<Error> {
        match name.0.as_slice() {
            [ObjectNamePart::Identifier(ident)] => {
                self.relations.push(Relation {
                    written: ident.value.clone(),
                    compared: compared(ident),
                    shown: ident.to_string(),
                });
                ControlFlow::Continue(())
            }
            _ => {
                let names: Vec<&str> = Dataset::ALL.iter().map(|d| d.name()).collect();
                ControlFlow::Break(refused(
                    ARGUMENT,
                    format!(
                        "no table {name}; the lake's tables are {}, named alone",
                        names.join(", ")
                    ),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(query: &str) -> String {
        match Checked::parse(query) {
            Ok(_) => panic!("{query} was not refused"),
            Err(e) => {
                assert!(matches!(e, Error::InvalidArgument { .. }), "{e:?}");
                let text = e.to_string();
                assert!(!text.contains('\n'), "{text}");
                text
            }
        }
    }

    fn tables(query: &str) -> Vec<(String, Dataset)> {
        Checked::parse(query).unwrap().tables
    }

    #[test]
    fn a_query_names_its_datasets_once_in_any_case_and_ctes_are_not_tables() {
        assert_eq!(
            tables("select count(*) from swaps"),
            [("swaps".to_owned(), Dataset::Swaps)]
        );
        assert_eq!(
            tables(
                "with t as (select * from SWAPS) select * from t join trades using (id) \
                 union all select * from t"
            ),
            [
                ("SWAPS".to_owned(), Dataset::Swaps),
                ("trades".to_owned(), Dataset::Trades)
            ]
        );
        // A WITH name shadows a dataset of the same name.
        assert_eq!(
            tables("with swaps as (select * from bars) select * from swaps"),
            [("bars".to_owned(), Dataset::Bars)]
        );
        assert_eq!(
            tables("select * from (select 1 as a) where a in (select count(*) from candles)"),
            [("candles".to_owned(), Dataset::Candles)]
        );
        assert!(tables("select 1").is_empty());
    }

    #[test]
    fn what_is_not_one_read_of_known_tables_is_refused_naming_why() {
        assert!(refusal("selec 1").contains("cannot parse"));
        assert!(refusal("").contains("empty"));
        assert!(refusal("select 1; select 2").contains("2 statements"));
        assert!(refusal("select * from nowhere").contains("no table nowhere"));
        assert!(refusal("select * from \"SWAPS\"").contains("no table \"SWAPS\""));
        assert!(refusal("select * from lake.swaps").contains("no table lake.swaps"));
        for write in [
            "create table t as select * from swaps",
            "drop table swaps",
            "insert into swaps select * from swaps",
            "delete from swaps",
            "truncate table swaps",
            "copy swaps to 'x.csv'",
            "explain select * from swaps",
            "show tables",
            "with t as (select 1) insert into swaps select * from t",
        ] {
            assert!(refusal(write).contains("is not a query"), "{write}");
        }
        assert!(refusal("select * into t from swaps").contains("SELECT INTO"));
        assert!(
            refusal("select * from read_parquet('lake/swaps/**/*.parquet')")
                .contains("table function")
        );
        assert!(
            refusal("select (select count(*) from read_csv('x.csv')) from swaps")
                .contains("table function")
        );
    }
}
