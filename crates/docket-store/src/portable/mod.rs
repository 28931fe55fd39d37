//! Store methods whose flow is the same on every backend, written once over [`Driver`]: the
//! backends differ only in their statements' text and in how a value is bound. A file per noun.

mod audit;
mod batches;
mod counts;
mod leases;
mod maintenance;
mod nodes;
mod notifications;
mod processes;
mod queues;
mod schedules;
mod tasks;
mod tokens;

use counts::counts;
pub(crate) use counts::{counted_to, counts_before_retry, counts_forget, counts_lock, pruned_rows};
pub(crate) use leases::apply_failures;
pub(crate) use maintenance::{promote_returning, prune_returning};
pub(crate) use processes::{break_process, insert_each_event};
pub(crate) use tasks::{insert_each, list_sql};

use crate::driver::{
    again, again_up_to, args, stmt, Arg, Broken, Driver, DriverTx, LeaseDriver, Listen,
    MaintenanceDriver, TaskDriver,
};
use crate::row;
use crate::row::Cols;
use crate::*;
use async_trait::async_trait;
use docket_core::api::AuditEntry;
use docket_core::batch::Batch;
use docket_core::lease::{Failure, LeaseCheck};
use docket_core::process::{Event, Notice, Notification, Process};
use docket_core::task::ResolvedTask;
use docket_core::FailDecision;
use std::collections::HashMap;
