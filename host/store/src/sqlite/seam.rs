//! The SQLite side of the backend seam ([`crate::seam`]): one connection
//! (a write's transaction or the read connection), SQLite's numbered
//! parameters, values as SQLite stores them. Every future is ready at once.

use super::log::log_record;
use crate::StoreError;
use crate::records::Record;
use crate::seam::{Arg, Cell, Dialect, Tx, Values};
use rusqlite::Connection;
use rusqlite::types::{ToSqlOutput, ValueRef};
use std::future::{Future, ready};

/// A SQLite connection through the seam.
pub(crate) struct Lite<'a> {
    /// The connection (a write's transaction derefs to it).
    pub conn: &'a Connection,
    /// Whether it is a write's transaction (a read may not append).
    pub write: bool,
}

impl rusqlite::ToSql for Arg {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            Arg::Null => ValueRef::Null,
            Arg::Int(n) => ValueRef::Integer(*n),
            Arg::Bool(b) => ValueRef::Integer(i64::from(*b)),
            Arg::Text(s) => ValueRef::Text(s.as_bytes()),
            Arg::Bytes(b) => ValueRef::Blob(b),
        }))
    }
}

/// `sql` with PostgreSQL's `$1` parameters as SQLite's `?1` (the same
/// numbered parameter).
fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('?');
        } else {
            out.push(c);
        }
    }
    out
}

impl<'a> Lite<'a> {
    /// A write's transaction.
    pub(crate) fn write(tx: &'a rusqlite::Transaction<'_>) -> Self {
        Lite {
            conn: tx,
            write: true,
        }
    }

    /// The read connection.
    pub(crate) fn read(conn: &'a Connection) -> Self {
        Lite { conn, write: false }
    }

    fn exec_now(&self, sql: &str, args: &[Arg]) -> Result<u64, StoreError> {
        let n = self
            .conn
            .prepare_cached(&numbered(sql))?
            .execute(rusqlite::params_from_iter(args))?;
        Ok(n as u64)
    }

    fn rows_now(&self, sql: &str, args: &[Arg]) -> Result<Vec<Values>, StoreError> {
        let mut st = self.conn.prepare_cached(&numbered(sql))?;
        let n = st.column_count();
        let mut rows = st.query(rusqlite::params_from_iter(args))?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            let mut cells = Vec::with_capacity(n);
            for i in 0..n {
                cells.push(match r.get_ref(i)? {
                    ValueRef::Null => Cell::Null,
                    ValueRef::Integer(v) => Cell::Int(v),
                    ValueRef::Real(v) => Cell::Real(v),
                    ValueRef::Text(t) => Cell::Text(
                        std::str::from_utf8(t)
                            .map_err(|e| StoreError::Decode(format!("column {i}: {e}")))?
                            .to_string(),
                    ),
                    ValueRef::Blob(b) => Cell::Bytes(b.to_vec()),
                });
            }
            out.push(Values(cells));
        }
        Ok(out)
    }
}

impl Tx for Lite<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn exec(
        &self,
        sql: &str,
        args: &[Arg],
    ) -> impl Future<Output = Result<u64, StoreError>> + Send {
        ready(self.exec_now(sql, args))
    }

    fn rows(
        &self,
        sql: &str,
        args: &[Arg],
    ) -> impl Future<Output = Result<Vec<Values>, StoreError>> + Send {
        ready(self.rows_now(sql, args))
    }

    fn log(&self, r: &Record, at: &str) -> impl Future<Output = Result<(), StoreError>> + Send {
        ready(if self.write {
            log_record(self.conn, r, at)
        } else {
            Err(StoreError::Backend(
                "a log record appended outside a write".into(),
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn postgres_parameters_read_as_the_same_sqlite_ones() {
        assert_eq!(
            super::numbered("UPDATE t SET a = $2 WHERE b = $1 AND j = '$.model' AND c = $10"),
            "UPDATE t SET a = ?2 WHERE b = ?1 AND j = '$.model' AND c = ?10"
        );
    }
}
