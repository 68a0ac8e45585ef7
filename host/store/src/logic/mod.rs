//! The store's logic written once, over the backend seam ([`crate::seam`]):
//! each function runs in a dialect's transaction (a write) or on its
//! connection (a read), given as a [`crate::seam::Tx`]. A dialect's trait
//! implementation only opens the one or the other and calls it.

pub(crate) mod audit;
pub(crate) mod budget;
pub(crate) mod keys;
pub(crate) mod switch;
pub(crate) mod tasks;
pub(crate) mod tokens;
pub(crate) mod traces;
