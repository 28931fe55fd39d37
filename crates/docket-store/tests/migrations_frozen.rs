//! A migration, once released, never changes: sqlx refuses to start on a database where an
//! applied migration's checksum differs ("previously applied but has been modified"), so an
//! edit — even to a comment — would stop every upgraded node. `migrations/SHA256SUMS` holds the
//! hash of every migration file; a new migration adds its line (`sha256sum` output, path
//! relative to this crate), an old one's line never changes.

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;

#[test]
fn released_migrations_never_change() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sums = std::fs::read_to_string(root.join("migrations/SHA256SUMS")).unwrap();
    let listed: BTreeMap<String, String> = sums
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (hash, path) = l.split_once("  ").expect("`<sha256>  <path>` lines");
            (path.to_string(), hash.to_string())
        })
        .collect();
    let mut found = BTreeMap::new();
    for backend in ["postgres", "sqlite", "mysql"] {
        for entry in std::fs::read_dir(root.join("migrations").join(backend)).unwrap() {
            let path = entry.unwrap().path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let hash = format!("{:x}", Sha256::digest(std::fs::read(&path).unwrap()));
            found.insert(rel, hash);
        }
    }
    for (path, hash) in &listed {
        match found.get(path) {
            None => panic!("{path} is listed in SHA256SUMS but gone: a released migration stays"),
            Some(h) => assert_eq!(
                h, hash,
                "{path} changed after its release: add a new migration instead"
            ),
        }
    }
    for path in found.keys() {
        assert!(
            listed.contains_key(path),
            "{path} is not in migrations/SHA256SUMS: add its line (sha256sum {path})"
        );
    }
}
