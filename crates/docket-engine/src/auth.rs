//! API tokens: creating them and telling who a request comes from (docs: operations/security.md). The
//! store keeps only hashes; every check reads the database, so a revoked token stops working
//! at once on every node.

use crate::Engine;
use crate::EngineError;
use docket_core::api::TokenView;
use docket_core::auth::{hash_token, new_token, Grant, Scope};
use docket_store::{TokenCreate, TokenRevoke, TokenTouch};
use std::time::Duration;

/// Who a request comes from: a token's name and grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The token's name (recorded as the actor of audited actions).
    pub name: String,
    /// What it may do.
    pub grant: Grant,
}

/// The result of checking a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenCheck {
    /// A live token.
    Valid(Caller),
    /// No token has this hash.
    Unknown,
    /// The token was revoked.
    Revoked,
    /// The token's `expires_at` has passed.
    Expired,
}

/// A token's `last_used_at` is written at most this often, so a busy worker does not turn
/// every request into a write.
pub const TOUCH_EVERY: Duration = Duration::from_secs(60);

/// What [`Engine::token_create`] is asked for.
#[derive(Debug, Clone, Default)]
pub struct NewToken {
    /// Name (1–256 characters; unique among tokens not revoked).
    pub name: String,
    /// Scopes (at least one).
    pub scopes: Vec<Scope>,
    /// With `work`: only these queues (empty: all).
    pub queues: Vec<String>,
    /// Stops working after this long (none: never); 1 s ..= 36500 days.
    pub expires_in: Option<Duration>,
    /// Use this token instead of a new random one (`DOCKET_ADMIN_TOKEN`): at least 32
    /// characters, no whitespace or control characters.
    pub secret: Option<String>,
}

impl Engine {
    /// Creates a token: returns it (the only time it is ever available) and what may be shown
    /// of it.
    ///
    /// # Errors
    /// [`EngineError::Invalid`] (bad name, no scope, bad queue, expiry out of range);
    /// [`EngineError::Conflict`] when a live token has the name.
    pub async fn token_create(&self, t: NewToken) -> Result<(String, TokenView), EngineError> {
        docket_core::task::check_name("name", &t.name).map_err(EngineError::Invalid)?;
        if t.scopes.is_empty() {
            return Err(EngineError::Invalid(
                "a token needs at least one scope: admin, read, enqueue, work, process, sql".into(),
            ));
        }
        for q in &t.queues {
            docket_core::task::check_name("queue", q).map_err(EngineError::Invalid)?;
        }
        let now = self.clock.now();
        let expires_at = match t.expires_in {
            None => None,
            Some(d) => {
                docket_core::duration::check_range(
                    "expires_in",
                    d,
                    Duration::from_secs(1),
                    docket_core::duration::MAX,
                )
                .map_err(EngineError::Invalid)?;
                Some(docket_core::time::add(now, d))
            }
        };
        let mut scopes = t.scopes;
        scopes.sort();
        scopes.dedup();
        let token = match t.secret {
            Some(s)
                if s.chars().count() < 32
                    || s.chars().any(|c| c.is_whitespace() || c.is_control()) =>
            {
                return Err(EngineError::Invalid(
                    "a given token must have at least 32 characters and no whitespace".into(),
                ))
            }
            Some(s) => s,
            None => new_token(),
        };
        let rec = self
            .store
            .token_create(TokenCreate {
                name: t.name,
                hash: hash_token(&token),
                scopes,
                queues: t.queues,
                expires_at,
                now,
            })
            .await?;
        Ok((token, rec.into()))
    }

    /// Checks a presented token; a valid one's `last_used_at` is updated (at most every
    /// [`TOUCH_EVERY`]; a failure to write it is logged, not fatal).
    ///
    /// # Errors
    /// The store failed.
    pub async fn token_check(&self, token: &str) -> Result<TokenCheck, EngineError> {
        let Some(rec) = self.store.token_by_hash(&hash_token(token)).await? else {
            return Ok(TokenCheck::Unknown);
        };
        let now = self.clock.now();
        if rec.revoked_at.is_some() {
            return Ok(TokenCheck::Revoked);
        }
        if rec.expires_at.is_some_and(|e| e <= now) {
            return Ok(TokenCheck::Expired);
        }
        if rec
            .last_used_at
            .is_none_or(|t| docket_core::time::since(now, t) >= TOUCH_EVERY)
        {
            if let Err(e) = self.store.token_touch(TokenTouch { id: rec.id, now }).await {
                tracing::warn!(error = %e, token = %rec.name, "recording a token's last use failed");
            }
        }
        Ok(TokenCheck::Valid(Caller {
            name: rec.name,
            grant: Grant {
                scopes: rec.scopes,
                queues: rec.queues,
            },
        }))
    }

    /// Revokes the live token named `name`; false when there is none.
    ///
    /// # Errors
    /// The store failed.
    pub async fn token_revoke(&self, name: &str) -> Result<bool, EngineError> {
        Ok(self
            .store
            .token_revoke(TokenRevoke {
                name: name.to_string(),
                now: self.clock.now(),
            })
            .await?)
    }

    /// Whether any token is live (not revoked, not expired): with none, `docket serve` with auth
    /// required creates a bootstrap admin token.
    ///
    /// # Errors
    /// The store failed.
    pub async fn token_any_live(&self) -> Result<bool, EngineError> {
        let now = self.clock.now();
        Ok(self
            .store
            .token_list()
            .await?
            .iter()
            .any(|t| t.revoked_at.is_none() && t.expires_at.is_none_or(|e| e > now)))
    }
}
