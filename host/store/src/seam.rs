//! The backend seam: what a dialect gives the store's logic written once
//! (`logic/`). A dialect is a thin adapter (`sqlite/seam.rs`,
//! `postgres/seam.rs`): it runs one SQL text with bound values, returns
//! the rows as plain values, and appends a log record in the write's
//! transaction. No driver type crosses it.
//!
//! SQL written once uses PostgreSQL's `$1`-style parameters; the SQLite
//! adapter reads them as SQLite's `?1` (the same numbered parameters).
//! Where the dialects' SQL differs, the logic asks [`Tx::dialect`].
//!
//! The logic is `async` (PostgreSQL's driver is), generic over [`Tx`]; the
//! SQLite adapter's futures are ready at once (its driver is synchronous,
//! on the writer thread or under the read connection's lock), so
//! [`now`] runs them to the end without an executor.

use crate::StoreError;
use crate::decode::{Cells, Column};
use crate::records::Record;
use std::future::Future;
use std::task::{Context, Poll, Waker};

/// Which SQL dialect a [`Tx`] speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// SQLite (the embedded store).
    Sqlite,
    /// PostgreSQL (the shared store).
    Postgres,
}

/// A value bound to a statement's parameter.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Arg {
    /// SQL NULL.
    Null,
    /// A BIGINT (SQLite INTEGER).
    Int(i64),
    /// A BOOLEAN (SQLite INTEGER, 0 or 1).
    Bool(bool),
    /// TEXT.
    Text(String),
    /// BYTEA (SQLite BLOB).
    Bytes(Vec<u8>),
}

impl From<&str> for Arg {
    fn from(v: &str) -> Self {
        Arg::Text(v.to_string())
    }
}

impl From<&String> for Arg {
    fn from(v: &String) -> Self {
        Arg::Text(v.clone())
    }
}

impl From<Option<&str>> for Arg {
    fn from(v: Option<&str>) -> Self {
        v.map_or(Arg::Null, Arg::from)
    }
}

impl From<&Option<String>> for Arg {
    fn from(v: &Option<String>) -> Self {
        Arg::from(v.as_deref())
    }
}

impl From<bool> for Arg {
    fn from(v: bool) -> Self {
        Arg::Bool(v)
    }
}

impl From<u64> for Arg {
    /// Saturating: a BIGINT holds at most `i64::MAX`.
    fn from(v: u64) -> Self {
        Arg::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl From<i64> for Arg {
    fn from(v: i64) -> Self {
        Arg::Int(v)
    }
}

impl From<&[u8]> for Arg {
    fn from(v: &[u8]) -> Self {
        Arg::Bytes(v.to_vec())
    }
}

/// One column's value of a row read through the seam.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell {
    /// SQL NULL.
    Null,
    /// An integer (a boolean is 0 or 1).
    Int(i64),
    /// A floating-point number.
    Real(f64),
    /// Text.
    Text(String),
    /// Bytes.
    Bytes(Vec<u8>),
}

/// A row read through the seam: its columns' values, in order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Values(pub Vec<Cell>);

impl Cells for Values {
    fn cell<T: Column>(&self, i: usize) -> Result<T, StoreError> {
        use rusqlite::types::{FromSql, ValueRef};
        let v = match self.0.get(i) {
            None => return Err(StoreError::Decode(format!("no column {i}"))),
            Some(Cell::Null) => ValueRef::Null,
            Some(Cell::Int(n)) => ValueRef::Integer(*n),
            Some(Cell::Real(x)) => ValueRef::Real(*x),
            Some(Cell::Text(s)) => ValueRef::Text(s.as_bytes()),
            Some(Cell::Bytes(b)) => ValueRef::Blob(b),
        };
        <T as FromSql>::column_result(v).map_err(|e| StoreError::Decode(format!("column {i}: {e}")))
    }
}

/// A transaction (or, for reads, a connection) of one dialect.
pub(crate) trait Tx {
    /// Its dialect.
    fn dialect(&self) -> Dialect;

    /// Run `sql` with `args`; the rows it changed.
    ///
    /// # Errors
    /// The driver's, as [`StoreError`].
    fn exec(&self, sql: &str, args: &[Arg])
    -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Run `sql` with `args`; the rows it returned.
    ///
    /// # Errors
    /// The driver's, as [`StoreError`].
    fn rows(
        &self,
        sql: &str,
        args: &[Arg],
    ) -> impl Future<Output = Result<Vec<Values>, StoreError>> + Send;

    /// Append `r` to the log at `at`, in this write's transaction.
    ///
    /// # Errors
    /// [`StoreError::Backend`] in a read; the driver's.
    fn log(&self, r: &Record, at: &str) -> impl Future<Output = Result<(), StoreError>> + Send;
}

/// The first row `sql` returns, if any.
///
/// # Errors
/// As [`Tx::rows`].
pub(crate) async fn first<X: Tx>(
    tx: &X,
    sql: &str,
    args: &[Arg],
) -> Result<Option<Values>, StoreError> {
    Ok(tx.rows(sql, args).await?.into_iter().next())
}

/// Run a future of the SQLite adapter, which is ready at once, to its end.
///
/// # Errors
/// The future's; [`StoreError::Backend`] if it was not ready (the store's
/// logic awaited something other than the adapter: a programming error).
pub(crate) fn now<T>(f: impl Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => Err(StoreError::Backend(
            "the store's logic awaited something other than SQLite".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_future_that_is_not_ready_is_an_error_not_a_hang() {
        let e = now(std::future::pending::<Result<(), StoreError>>()).unwrap_err();
        assert!(matches!(e, StoreError::Backend(_)), "{e}");
        assert_eq!(now(std::future::ready(Ok::<_, StoreError>(7))).unwrap(), 7);
    }

    #[test]
    fn values_decode_as_the_row_types_want() {
        let v = Values(vec![Cell::Int(1), Cell::Null, Cell::Text("x".into())]);
        assert!(v.cell::<bool>(0).unwrap());
        assert_eq!(v.cell::<Option<String>>(1).unwrap(), None);
        assert_eq!(v.cell::<String>(2).unwrap(), "x");
        assert!(matches!(v.cell::<i64>(2), Err(StoreError::Decode(_))));
        assert!(matches!(v.cell::<i64>(3), Err(StoreError::Decode(_))));
    }
}
