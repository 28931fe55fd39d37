//! Processes: the calls whose flow is the same on every backend, written once over [`Driver`](crate::driver::Driver).

use super::*;

#[async_trait]
impl<D: Driver + ProcessDriver> ProcessStore for D {
    async fn namespace_put(&self, p: NamespacePutParams<'_>) -> Result<()> {
        self.execute(
            stmt!(processes, namespace_put),
            args![p.name, p.config, p.now],
        )
        .await?;
        Ok(())
    }

    async fn namespace_list(&self) -> Result<Vec<NamespaceRecord>> {
        let rows = self
            .fetch(stmt!(processes, namespace_list), args![])
            .await?;
        rows.iter()
            .map(|r| {
                let name = r.text("name")?;
                let config = r.json("config").map_err(|e| match e {
                    StoreError::Corrupt(m) => StoreError::Corrupt(format!("namespace {name}: {m}")),
                    e => e,
                })?;
                Ok(NamespaceRecord { name, config })
            })
            .collect()
    }

    // Each process flow is one transaction, rolled back whole on a deadlock or a certification
    // conflict (Galera: every process event takes the event sequence's lock row, so two nodes
    // stepping processes at once conflict there): going again is safe.
    async fn process_create(&self, p: ProcessCreateParams<'_>) -> Result<Task> {
        again_up_to(self.contended_tries(), || {
            ProcessDriver::process_create(self, p.clone())
        })
        .await
    }

    async fn process_enqueue(&self, p: ProcessEnqueueParams<'_>) -> Result<Task> {
        again_up_to(self.contended_tries(), || {
            ProcessDriver::process_enqueue(self, p.clone())
        })
        .await
    }

    async fn process_get(&self, p: ProcessGetParams<'_>) -> Result<Option<ProcessWithHistory>> {
        use docket_core::process::Direction;
        let Some(r) = self
            .fetch_one(stmt!(processes, get), args![p.namespace, p.id])
            .await?
        else {
            return Ok(None);
        };
        let process = row::process(&r)?;
        let events = match p.range.direction {
            Direction::Forward => stmt!(processes, events_after),
            Direction::Backward => stmt!(processes, events_before),
        };
        let offset = p.range.offset.filter(|o| *o > 0);
        let limit = p.range.limit.unwrap_or(i64::MAX);
        let rows = self
            .fetch(events, args![p.namespace, p.id, offset, limit])
            .await?;
        Ok(Some(ProcessWithHistory {
            process,
            history: rows.iter().map(row::event).collect::<Result<_>>()?,
        }))
    }

    async fn process_commit(&self, c: ProcessCommit) -> Result<()> {
        again_up_to(self.contended_tries(), || {
            ProcessDriver::process_commit(self, c.clone())
        })
        .await
    }

    async fn process_fail(&self, f: ProcessFail) -> Result<LeaseOutcome> {
        again_up_to(self.contended_tries(), || {
            ProcessDriver::process_fail(self, f.clone())
        })
        .await
    }

    async fn process_remove(&self, p: ProcessRemoveParams<'_>) -> Result<()> {
        again_up_to(self.contended_tries(), || {
            ProcessDriver::process_remove(self, p.clone())
        })
        .await
    }

    async fn process_import(&self, p: ProcessImport) -> Result<()> {
        again_up_to(self.contended_tries(), || {
            ProcessDriver::process_import(self, p.clone())
        })
        .await
    }

    async fn process_simple_repair(&self, p: ProcessSimpleRepairParams<'_>) -> Result<()> {
        use docket_core::process::Notice;
        let p = &p;
        let (repaired, status) = again(|| async move {
            let mut tx = self.begin().await?;
            let repaired = tx
                .execute(
                    stmt!(processes, simple_repair),
                    args![p.namespace, p.id, p.now],
                )
                .await?;
            if repaired == 1 {
                tx.publish(
                    p.namespace,
                    p.id,
                    &[Notice::Repaired { simple: true }],
                    p.now,
                )
                .await?;
            }
            let status = tx
                .fetch_one(stmt!(processes, status), args![p.namespace, p.id])
                .await?
                .map(|r| r.text("status"))
                .transpose()?;
            tx.commit().await?;
            Ok((repaired, status))
        })
        .await?;
        match (repaired, status) {
            (1, _) => Ok(()),
            (_, None) => Err(StoreError::NotFound(format!(
                "process {}/{}",
                p.namespace, p.id
            ))),
            (_, Some(st)) => Err(StoreError::InvalidState(format!("process is {st}"))),
        }
    }

    async fn process_list(&self, p: ProcessListParams<'_>) -> Result<Vec<Process>> {
        let rows = self
            .fetch(
                stmt!(processes, list),
                args![p.namespace, p.status.map(|s| s.as_str()), p.after, p.limit],
            )
            .await?;
        rows.iter().map(row::process).collect()
    }

    async fn process_collect_zombies(&self, p: ProcessCollectZombiesParams) -> Result<u64> {
        ProcessDriver::process_collect_zombies(self, p).await
    }
}
