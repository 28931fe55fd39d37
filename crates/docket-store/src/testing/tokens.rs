//! Conformance cases: tokens.

use super::fixtures::*;

/// Tokens: create (only the hash is kept), find by hash, names unique among live tokens,
/// revoke, last use, list.
pub(super) async fn api_tokens(b: Bundle) {
    use docket_core::auth::Scope;
    let s = &b.store;
    let made = s
        .token_create(TokenCreate {
            name: "ci".into(),
            hash: "h1".into(),
            scopes: vec![Scope::Work, Scope::Read],
            queues: vec!["emails".into()],
            expires_at: Some(t0() + secs(3600)),
            now: t0(),
        })
        .await
        .unwrap();
    assert_eq!(made.name, "ci");
    assert_eq!(made.scopes, vec![Scope::Work, Scope::Read]);
    assert_eq!(made.queues, vec!["emails".to_string()]);
    assert_eq!(made.created_at, t0());
    assert_eq!(made.expires_at, Some(t0() + secs(3600)));
    assert_eq!((made.revoked_at, made.last_used_at), (None, None));
    let found = s.token_by_hash("h1").await.unwrap().unwrap();
    assert_eq!(found, made);
    assert!(s.token_by_hash("nope").await.unwrap().is_none());
    // A second live token with the name is refused; so is a second token with the hash.
    let again = |name: &str, hash: &str| TokenCreate {
        name: name.into(),
        hash: hash.into(),
        scopes: vec![Scope::Admin],
        queues: vec![],
        expires_at: None,
        now: t0(),
    };
    assert!(matches!(
        s.token_create(again("ci", "h2")).await,
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        s.token_create(again("other", "h1")).await,
        Err(StoreError::Conflict(_))
    ));
    s.token_touch(TokenTouch {
        id: made.id,
        now: t0() + secs(5),
    })
    .await
    .unwrap();
    assert_eq!(
        s.token_by_hash("h1").await.unwrap().unwrap().last_used_at,
        Some(t0() + secs(5))
    );
    // Revoking: once; then the name is free again and the revoked one stays listed.
    let rv = |name: &str| TokenRevoke {
        name: name.into(),
        now: t0() + secs(10),
    };
    assert!(s.token_revoke(rv("ci")).await.unwrap());
    assert!(!s.token_revoke(rv("ci")).await.unwrap());
    assert!(!s.token_revoke(rv("missing")).await.unwrap());
    assert_eq!(
        s.token_by_hash("h1").await.unwrap().unwrap().revoked_at,
        Some(t0() + secs(10))
    );
    let second = s.token_create(again("ci", "h2")).await.unwrap();
    let all = s.token_list().await.unwrap();
    assert_eq!(
        all.iter().map(|t| t.id).collect::<Vec<_>>(),
        vec![made.id, second.id]
    );
    assert!(all[0].revoked_at.is_some() && all[1].revoked_at.is_none());
}
