//! SQL written once for both backends: statements take their parameters as
//! `$1`, `$2`, ... and [`Val`]s; each backend implements [`Db`], saying only
//! how to run a statement (SQLite numbers its parameters `?1`, PostgreSQL
//! binds each to its column's type).

use super::StoreError;

/// A value bound to or read from a statement.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Val {
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
    fn rows(&self, sql: &str, params: &[Val]) -> Result<Vec<Vec<Val>>, StoreError>;
    /// Inserts rows into `table (columns)`. The first `shared.len()` columns
    /// take `shared` in every row (bound once a statement: SQLite copies
    /// every text it binds); `values` holds the other columns, row after row.
    fn insert_many(
        &self,
        table: &str,
        columns: &[&str],
        shared: &[Arg<'_>],
        values: &[Arg<'_>],
    ) -> Result<(), StoreError>;
    /// Fails with `Fenced` when the duty this write is for was taken over.
    fn check_fence(&self) -> Result<(), StoreError>;
    /// SQL for the start (Unix seconds) of the UTC month holding `col`.
    fn month_of(&self, col: &str) -> String;
}

/// `INSERT INTO table (columns) VALUES ...` for `rows` rows of
/// [`Db::insert_many`], its parameters numbered after `mark` (`$` or `?`):
/// the `shared` first columns are parameters 1 to `shared` in every row.
pub(super) fn insert_sql(
    table: &str,
    columns: &[&str],
    shared: usize,
    rows: usize,
    mark: char,
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
        "INSERT INTO {table} ({}) VALUES {}",
        columns.join(", "),
        groups.join(", ")
    )
}
