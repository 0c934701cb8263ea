//! The master's pools: each as it runs ([`runtime`]: [`PoolRuntime`], the [`Pools`] by
//! [`PoolId`]), and how they are built from the run configuration ([`setup`]), at start and on
//! every reload.

pub mod runtime;
pub mod setup;

pub use runtime::{PoolId, PoolRuntime, Pools};
