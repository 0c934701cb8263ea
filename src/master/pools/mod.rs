//! The master's pools: how they are built from the run configuration ([`setup`]), at start and on
//! every reload.

pub mod setup;
