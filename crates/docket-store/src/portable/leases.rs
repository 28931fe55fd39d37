//! Releases of claims and held tasks, written once over [`Driver`](crate::driver::Driver).

use super::*;

/// How long a claim's release mark is kept: far longer than a claim takes to commit (its
/// long-poll is at most a minute), so the claim's check after it commits still sees it.
const RELEASE_MARK_KEPT: std::time::Duration = std::time::Duration::from_secs(3600);

/// [`LeaseStore::task_release`] on every backend. A [`Release::Claim`] commits its mark
/// before it looks for the claim's tasks, and a claim's check ([`Release::IfClaimReleased`])
/// reads the mark only after the claim committed: whichever runs second sees the other, so a
/// release never misses a claim that overtook it.
///
/// # Errors
/// Database failure.
pub(crate) async fn task_release<D: Driver>(
    d: &D,
    p: TaskReleaseParams<'_>,
) -> Result<Vec<Released>> {
    let nonce = docket_core::lease::nonce_hex(p.nonce);
    let ids = match p.release {
        Release::Claim => {
            let old = docket_core::time::sub(p.now, RELEASE_MARK_KEPT);
            d.execute(stmt!(leases, release_prune), args![old]).await?;
            d.execute(stmt!(leases, release_mark), args![nonce.as_str(), p.now])
                .await?;
            None
        }
        Release::Tasks(ids) => Some(ids),
        Release::IfClaimReleased(ids) => {
            if ids.is_empty()
                || d.fetch_one(stmt!(leases, release_marked), args![nonce.as_str()])
                    .await?
                    .is_none()
            {
                return Ok(vec![]);
            }
            Some(ids)
        }
    };
    if ids.is_some_and(<[i64]>::is_empty) {
        return Ok(vec![]);
    }
    let ids = ids.map(|i| serde_json::Value::from(i.to_vec()));
    let (nonce, ids) = (&nonce, &ids);
    again(|| async move {
        let mut tx = d.begin().await?;
        let rows = tx
            .fetch(
                stmt!(leases, release_lock),
                args![nonce.as_str(), p.queue, ids.as_ref()],
            )
            .await?;
        let out = rows
            .iter()
            .map(|r| {
                Ok(Released {
                    id: r.int("id")?,
                    queue: r.text("queue")?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        if !out.is_empty() {
            let locked = serde_json::Value::from(out.iter().map(|r| r.id).collect::<Vec<_>>());
            tx.execute(stmt!(leases, release), args![&locked]).await?;
        }
        tx.commit().await?;
        Ok(out)
    })
    .await
}
