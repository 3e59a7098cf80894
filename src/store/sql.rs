//! SQL written once for both backends: statements take their parameters as
//! `$1`, `$2`, ... and [`Val`]s; each backend implements [`Db`], saying only
//! how to run a statement (SQLite numbers its parameters `?1`, PostgreSQL
//! binds each to its column's type), and [`Backend`], saying how to reach a
//! connection and run a transaction. Where the two dialects truly differ
//! (locking clauses, JSON, date arithmetic), the shared statements take the
//! fragment from [`Dialect`], so every difference is written here.
//!
//! Parameters that may be NULL are compared as `CAST($n AS TEXT) IS NULL`
//! (PostgreSQL must know a parameter's type; both read that form).

use super::{Fence, StoreError};

/// A value bound to or read from a statement.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) enum Val {
    #[default]
    Null,
    Int(i64),
    Real(f64),
    Text(String),
}

impl From<&str> for Val {
    fn from(s: &str) -> Self {
        Self::Text(s.to_owned())
    }
}

impl From<String> for Val {
    fn from(s: String) -> Self {
        Self::Text(s)
    }
}

impl From<i64> for Val {
    fn from(n: i64) -> Self {
        Self::Int(n)
    }
}

impl From<f64> for Val {
    fn from(n: f64) -> Self {
        Self::Real(n)
    }
}

impl<T: Into<Val>> From<Option<T>> for Val {
    fn from(v: Option<T>) -> Self {
        v.map_or(Self::Null, Into::into)
    }
}

/// A value `insert_many` binds. Its text is borrowed: a bill period is tens
/// of thousands of rows whose text the aggregate already holds, and copying
/// it into owned values took as long as the insert itself.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Arg<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(&'a str),
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(s: &'a str) -> Self {
        Self::Text(s)
    }
}

impl From<i64> for Arg<'_> {
    fn from(n: i64) -> Self {
        Self::Int(n)
    }
}

impl From<f64> for Arg<'_> {
    fn from(n: f64) -> Self {
        Self::Real(n)
    }
}

impl<'a, T: Into<Arg<'a>>> From<Option<T>> for Arg<'a> {
    fn from(v: Option<T>) -> Self {
        v.map_or(Self::Null, Into::into)
    }
}

impl<'a> From<&'a Val> for Arg<'a> {
    fn from(v: &'a Val) -> Self {
        match v {
            Val::Null => Self::Null,
            Val::Int(n) => Self::Int(*n),
            Val::Real(f) => Self::Real(*f),
            Val::Text(s) => Self::Text(s),
        }
    }
}

impl Val {
    pub(super) fn text(&self) -> Result<String, StoreError> {
        match self {
            Self::Text(s) => Ok(s.clone()),
            other => Err(StoreError::Corrupt(format!(
                "expected text, found {other:?}"
            ))),
        }
    }

    pub(super) fn opt_text(&self) -> Result<Option<String>, StoreError> {
        match self {
            Self::Null => Ok(None),
            other => other.text().map(Some),
        }
    }

    /// The text, borrowed (to parse it without a copy).
    pub(super) fn as_str(&self) -> Result<&str, StoreError> {
        match self {
            Self::Text(s) => Ok(s),
            other => Err(StoreError::Corrupt(format!(
                "expected text, found {other:?}"
            ))),
        }
    }

    /// As [`Val::as_str`], for a column that may be NULL.
    pub(super) fn opt_str(&self) -> Result<Option<&str>, StoreError> {
        match self {
            Self::Null => Ok(None),
            other => other.as_str().map(Some),
        }
    }

    /// The text, moved out of the row (which keeps a NULL in its place):
    /// reading a large answer then allocates each text once.
    pub(super) fn take_text(&mut self) -> Result<String, StoreError> {
        match std::mem::replace(self, Self::Null) {
            Self::Text(s) => Ok(s),
            other => Err(StoreError::Corrupt(format!(
                "expected text, found {other:?}"
            ))),
        }
    }

    /// As [`Val::take_text`], for a column that may be NULL.
    pub(super) fn take_opt_text(&mut self) -> Result<Option<String>, StoreError> {
        match self {
            Self::Null => Ok(None),
            other => other.take_text().map(Some),
        }
    }

    pub(super) fn int(&self) -> Result<i64, StoreError> {
        match self {
            Self::Int(n) => Ok(*n),
            #[allow(clippy::cast_possible_truncation)]
            Self::Real(f) if f.fract() == 0.0 => Ok(*f as i64),
            other => Err(StoreError::Corrupt(format!(
                "expected an integer, found {other:?}"
            ))),
        }
    }

    pub(super) fn opt_int(&self) -> Result<Option<i64>, StoreError> {
        match self {
            Self::Null => Ok(None),
            other => other.int().map(Some),
        }
    }

    pub(super) fn real(&self) -> Result<f64, StoreError> {
        self.opt_real().map(|v| v.unwrap_or(0.0))
    }

    pub(super) fn opt_real(&self) -> Result<Option<f64>, StoreError> {
        match self {
            Self::Null => Ok(None),
            #[allow(clippy::cast_precision_loss)]
            Self::Int(n) => Ok(Some(*n as f64)),
            Self::Real(f) => Ok(Some(*f)),
            Self::Text(t) => Err(StoreError::Corrupt(format!(
                "expected a number, found `{t}`"
            ))),
        }
    }
}

/// How a backend runs the statements of this module. Parameters are
/// written `$1`, `$2`, ...
pub(super) trait Db {
    fn exec(&self, sql: &str, params: &[Val]) -> Result<u64, StoreError>;
    /// Calls `each` with every row `sql` returns, in one buffer reused
    /// from row to row: a large answer (every current price) is read
    /// without holding all of its rows twice. `each` may move values out.
    fn each_row(
        &self,
        sql: &str,
        params: &[Val],
        each: &mut dyn FnMut(&mut [Val]) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;
    /// Every row `sql` returns.
    fn rows(&self, sql: &str, params: &[Val]) -> Result<Vec<Vec<Val>>, StoreError> {
        let mut out = Vec::new();
        self.each_row(sql, params, &mut |row| {
            out.push(row.iter_mut().map(std::mem::take).collect());
            Ok(())
        })?;
        Ok(out)
    }
    /// Inserts rows into `table (columns)`. The first `shared.len()` columns
    /// take `shared` in every row (bound once a statement: SQLite copies
    /// every text it binds); `values` holds the other columns, row after row.
    /// With `skip_existing`, a row whose key is stored already is left out
    /// (`ON CONFLICT DO NOTHING`). Answers how many rows went in.
    fn insert_rows(
        &self,
        table: &str,
        columns: &[&str],
        shared: &[Arg<'_>],
        values: &[Arg<'_>],
        skip_existing: bool,
    ) -> Result<u64, StoreError>;
    /// [`Db::insert_rows`] of rows that are all new.
    fn insert_many(
        &self,
        table: &str,
        columns: &[&str],
        shared: &[Arg<'_>],
        values: &[Arg<'_>],
    ) -> Result<(), StoreError> {
        self.insert_rows(table, columns, shared, values, false)
            .map(drop)
    }
    /// Fails with `Fenced` when the duty this write is for was taken over.
    fn check_fence(&self) -> Result<(), StoreError>;
    fn dialect(&self) -> Dialect;
}

/// The SQL dialect of a backend, for the few fragments that differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// SQL for the start (Unix seconds) of the UTC month holding `col`.
    pub(super) fn month_of(self, col: &str) -> String {
        match self {
            Self::Sqlite => {
                format!("CAST(strftime('%s', {col}, 'unixepoch', 'start of month') AS INTEGER)")
            }
            Self::Postgres => format!(
                "CAST(EXTRACT(EPOCH FROM date_trunc('month', to_timestamp({col}) AT TIME ZONE 'UTC')) AS BIGINT)"
            ),
        }
    }

    /// The rows (two text columns) of a JSON array of pairs in `param`.
    pub(super) fn json_pairs(self, param: &str) -> String {
        match self {
            Self::Sqlite => format!("SELECT value ->> 0, value ->> 1 FROM json_each({param})"),
            Self::Postgres => format!(
                "SELECT e ->> 0, e ->> 1 FROM json_array_elements(CAST({param} AS json)) AS e"
            ),
        }
    }

    /// Ends a subquery whose rows one replica claims: replicas claiming
    /// together skip each other's rows on PostgreSQL; SQLite has one writer.
    pub(super) fn skip_locked(self) -> &'static str {
        match self {
            Self::Sqlite => "",
            Self::Postgres => " FOR UPDATE SKIP LOCKED",
        }
    }

    /// Ends a read of a lease row that must hold until the transaction ends.
    pub(super) fn for_share(self) -> &'static str {
        match self {
            Self::Sqlite => "",
            Self::Postgres => " FOR SHARE",
        }
    }
}

/// What a backend gives the shared statements: a connection, transactions,
/// and what it knows of the replica it runs in.
pub(super) trait Backend {
    /// Runs `f` on this handle's connection, each statement on its own.
    fn on_conn<T>(&self, f: impl FnOnce(&dyn Db) -> Result<T, StoreError>)
    -> Result<T, StoreError>;
    /// Runs `f` in one transaction, committed when it returns `Ok` and
    /// rolled back otherwise; its [`Db::check_fence`] checks this handle's
    /// fence.
    fn in_transaction<T>(
        &mut self,
        f: impl FnOnce(&dyn Db) -> Result<T, StoreError>,
    ) -> Result<T, StoreError>;
    /// The lease of the duty this handle writes for, if any.
    fn fence(&self) -> Option<&Fence>;
    /// This process's id among replicas, on a shared backend.
    fn replica(&self) -> Option<&str>;
}

/// Raises the catalog's generation (see [`super::Store::catalog_generation`]),
/// and its list prices' when `list_prices` may have changed, in the caller's
/// transaction.
///
/// # Errors
/// On a database error.
pub(super) fn next_generation(db: &dyn Db, list_prices: bool) -> Result<(), StoreError> {
    db.exec(
        "UPDATE catalog_state
         SET generation = generation + 1, list_generation = list_generation + $1",
        &[i64::from(list_prices).into()],
    )?;
    Ok(())
}

/// `WITH RECURSIVE sources (source)`: every source in the sync log, one index
/// seek each (a `DISTINCT` or `GROUP BY` reads the whole log), and a last
/// NULL row to filter out.
pub(super) const SOURCES: &str = "WITH RECURSIVE sources (source) AS (
        SELECT min(source) FROM sync_runs
        UNION ALL
        SELECT (SELECT min(r.source) FROM sync_runs r WHERE r.source > s.source)
        FROM sources s WHERE s.source IS NOT NULL)";

/// The first column of the first row `sql` returns, if any (an `INSERT
/// ... RETURNING id`, a `count(*)`, a `max()`).
pub(super) fn first(db: &dyn Db, sql: &str, params: &[Val]) -> Result<Option<Val>, StoreError> {
    Ok(db
        .rows(sql, params)?
        .into_iter()
        .next()
        .and_then(|row| row.into_iter().next()))
}

/// `INSERT INTO table (columns) VALUES ...` for `rows` rows of
/// [`Db::insert_rows`], its parameters numbered after `mark` (`$` or `?`):
/// the `shared` first columns are parameters 1 to `shared` in every row.
pub(super) fn insert_sql(
    table: &str,
    columns: &[&str],
    shared: usize,
    rows: usize,
    mark: char,
    skip_existing: bool,
) -> String {
    let width = columns.len().saturating_sub(shared);
    let groups: Vec<String> = (0..rows)
        .map(|r| {
            let own = (1..=width).map(|c| shared + r * width + c);
            let marks: Vec<String> = (1..=shared)
                .chain(own)
                .map(|n| format!("{mark}{n}"))
                .collect();
            format!("({})", marks.join(", "))
        })
        .collect();
    format!(
        "INSERT INTO {table} ({}) VALUES {}{}",
        columns.join(", "),
        groups.join(", "),
        if skip_existing {
            " ON CONFLICT DO NOTHING"
        } else {
            ""
        }
    )
}

/// The id an `INSERT ... RETURNING id` returned.
pub(super) fn returned_id(id: Option<Val>) -> Result<i64, StoreError> {
    id.ok_or_else(|| StoreError::Corrupt("INSERT returned no id".to_owned()))?
        .int()
}
