//! The PostgreSQL side of the backend seam ([`crate::seam`]): a pooled
//! connection (inside this host's writer batch for a write), its prepared
//! statements, values as PostgreSQL's types.

use super::log::log_record;
use super::{Conn, execute, query};
use crate::StoreError;
use crate::records::Record;
use crate::seam::{Arg, Cell, Dialect, Tx, Values};
use std::future::Future;
use tokio_postgres::types::{IsNull, ToSql, Type};

/// A PostgreSQL connection through the seam.
pub(crate) struct Pg<'a>(pub &'a Conn);

impl ToSql for Arg {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Arg::Null => Ok(IsNull::Yes),
            Arg::Int(n) => n.to_sql(ty, out),
            Arg::Bool(b) => b.to_sql(ty, out),
            Arg::Text(s) => s.to_sql(ty, out),
            Arg::Bytes(b) => b.to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    fn to_sql_checked(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Arg::Null => Ok(IsNull::Yes),
            Arg::Int(n) => n.to_sql_checked(ty, out),
            Arg::Bool(b) => b.to_sql_checked(ty, out),
            Arg::Text(s) => s.to_sql_checked(ty, out),
            Arg::Bytes(b) => b.to_sql_checked(ty, out),
        }
    }
}

fn params(args: &[Arg]) -> Vec<&(dyn ToSql + Sync)> {
    args.iter().map(|a| a as &(dyn ToSql + Sync)).collect()
}

/// Column `i` of `r` as a seam value.
fn cell(r: &tokio_postgres::Row, i: usize) -> Result<Cell, StoreError> {
    let bad = |e: tokio_postgres::Error| StoreError::Decode(format!("column {i}: {e}"));
    let ty = r.columns().get(i).map(|c| c.type_().clone());
    Ok(match ty {
        Some(Type::INT8) => r
            .try_get::<_, Option<i64>>(i)
            .map_err(bad)?
            .map_or(Cell::Null, Cell::Int),
        Some(Type::INT4) => r
            .try_get::<_, Option<i32>>(i)
            .map_err(bad)?
            .map_or(Cell::Null, |v| Cell::Int(v.into())),
        Some(Type::BOOL) => r
            .try_get::<_, Option<bool>>(i)
            .map_err(bad)?
            .map_or(Cell::Null, |v| Cell::Int(v.into())),
        Some(Type::FLOAT8) => r
            .try_get::<_, Option<f64>>(i)
            .map_err(bad)?
            .map_or(Cell::Null, Cell::Real),
        Some(Type::BYTEA) => r
            .try_get::<_, Option<Vec<u8>>>(i)
            .map_err(bad)?
            .map_or(Cell::Null, Cell::Bytes),
        _ => r
            .try_get::<_, Option<String>>(i)
            .map_err(bad)?
            .map_or(Cell::Null, Cell::Text),
    })
}

impl Tx for Pg<'_> {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    async fn exec(&self, sql: &str, args: &[Arg]) -> Result<u64, StoreError> {
        execute(self.0, sql, &params(args)).await
    }

    async fn rows(&self, sql: &str, args: &[Arg]) -> Result<Vec<Values>, StoreError> {
        let rows = query(self.0, sql, &params(args)).await?;
        rows.iter()
            .map(|r| {
                (0..r.len())
                    .map(|i| cell(r, i))
                    .collect::<Result<_, _>>()
                    .map(Values)
            })
            .collect()
    }

    fn log(&self, r: &Record, at: &str) -> impl Future<Output = Result<(), StoreError>> + Send {
        log_record(self.0, r, at)
    }
}
