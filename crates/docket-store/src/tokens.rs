//! API tokens: create, look up by hash, list, revoke, touch ([`TokenStore`]).

use crate::{Result, StoreError};
use async_trait::async_trait;
use docket_core::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// API tokens (only hashes are stored).
#[async_trait]
pub trait TokenStore: Send + Sync {
    /// Stores a new API token (only its hash).
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when a token that is not revoked has the name (or the hash).
    async fn token_create(&self, p: TokenCreate) -> Result<TokenRecord>;

    /// The token with this hash, revoked and expired ones included (the caller decides).
    ///
    /// # Errors
    /// Database failure.
    async fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRecord>>;

    /// Every token, revoked ones included, by id.
    ///
    /// # Errors
    /// Database failure.
    async fn token_list(&self) -> Result<Vec<TokenRecord>>;

    /// Revokes the token named `name` that is not revoked yet; false when there is none.
    ///
    /// # Errors
    /// Database failure.
    async fn token_revoke(&self, p: TokenRevoke) -> Result<bool>;

    /// Sets a token's `last_used_at`.
    ///
    /// # Errors
    /// Database failure.
    async fn token_touch(&self, p: TokenTouch) -> Result<()>;
}

/// Params of [`TokenStore::token_create`].
#[derive(Debug, Clone)]
pub struct TokenCreate {
    /// Name (unique among tokens not revoked).
    pub name: String,
    /// SHA-256 of the token, hex ([`docket_core::auth::hash_token`]).
    pub hash: String,
    /// Scopes.
    pub scopes: Vec<docket_core::auth::Scope>,
    /// With `work`: only these queues (empty: all).
    pub queues: Vec<String>,
    /// When it stops working (none: never).
    pub expires_at: Option<Timestamp>,
    /// Now.
    pub now: Timestamp,
}

/// Params of [`TokenStore::token_revoke`].
#[derive(Debug, Clone)]
pub struct TokenRevoke {
    /// The token's name.
    pub name: String,
    /// Now.
    pub now: Timestamp,
}

/// Params of [`TokenStore::token_touch`].
#[derive(Debug, Clone)]
pub struct TokenTouch {
    /// Token id.
    pub id: i64,
    /// Now.
    pub now: Timestamp,
}

/// A stored API token (never the token itself).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TokenRecord {
    /// Id.
    pub id: i64,
    /// Name.
    pub name: String,
    /// SHA-256 of the token, hex.
    #[serde(skip)]
    pub hash: String,
    /// Scopes.
    pub scopes: Vec<docket_core::auth::Scope>,
    /// With `work`: only these queues (empty: all).
    pub queues: Vec<String>,
    /// Created.
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Timestamp,
    /// When it stops working (null: never).
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<Timestamp>,
    /// When it was revoked (null: it was not).
    #[schema(value_type = Option<String>, format = DateTime)]
    pub revoked_at: Option<Timestamp>,
    /// Last request made with it (updated at most once a minute).
    #[schema(value_type = Option<String>, format = DateTime)]
    pub last_used_at: Option<Timestamp>,
}

impl From<TokenRecord> for docket_core::api::TokenView {
    fn from(t: TokenRecord) -> Self {
        docket_core::api::TokenView {
            name: t.name,
            scopes: t.scopes,
            queues: t.queues,
            created_at: t.created_at,
            expires_at: t.expires_at,
            revoked_at: t.revoked_at,
            last_used_at: t.last_used_at,
        }
    }
}

/// Decodes a token row's `scopes` and `queues` JSON; a value that does not parse is an error
/// naming the row, never an empty grant.
pub(crate) fn decode_grant(
    id: i64,
    scopes: &Value,
    queues: &Value,
) -> Result<(Vec<docket_core::auth::Scope>, Vec<String>)> {
    let bad = |what: &str, e: serde_json::Error| {
        StoreError::Invalid(format!("token {id}: stored {what} do not parse: {e}"))
    };
    Ok((
        serde_json::from_value(scopes.clone()).map_err(|e| bad("scopes", e))?,
        serde_json::from_value(queues.clone()).map_err(|e| bad("queues", e))?,
    ))
}
