//! What every file of `portable/` uses (instead of a glob of its parent, which would make the
//! parent and its files use each other).

#![allow(unused_imports)]

pub(crate) use crate::driver::{
    again, again_up_to, args, stmt, Arg, Broken, Driver, DriverTx, LeaseDriver, Listen,
    MaintenanceDriver, TaskDriver,
};
pub(crate) use crate::row;
pub(crate) use crate::row::Cols;
pub(crate) use crate::*;
pub(crate) use async_trait::async_trait;
pub(crate) use docket_core::api::AuditEntry;
pub(crate) use docket_core::batch::Batch;
pub(crate) use docket_core::lease::{Failure, LeaseCheck};
pub(crate) use docket_core::process::{Event, Notice, Notification, Process};
pub(crate) use docket_core::task::ResolvedTask;
pub(crate) use docket_core::FailDecision;
pub(crate) use std::collections::HashMap;
