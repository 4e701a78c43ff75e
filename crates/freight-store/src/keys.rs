//! Keys as users write them ("run-3/_test.<locals>.sum_0000") and object_store paths. Each
//! segment is percent-encoded by `PathPart::from` (so `<`, `#`, `%`, non-ASCII and the rest are
//! safe on every backend, and a key can never look like a local staging file `name#3`), and
//! decoded again when listed, so that `list` gives back exactly the names that were saved.

use object_store::path::{Path, PathPart};
use percent_encoding::percent_decode_str;

use crate::error::{Error, Result};

/// The marker of the temporary keys of create-only streamed writes (never listed).
pub const STAGING: &str = ".freight-staging-";

/// Checks a key: non-empty segments separated by single slashes.
pub fn check(key: &str) -> Result<()> {
    let bad = |why| {
        Err(Error::BadKey {
            key: key.to_owned(),
            why,
        })
    };
    if key.is_empty() {
        return bad("a key cannot be empty");
    }
    if key.split('/').any(str::is_empty) {
        return bad("a key cannot start or end with '/' or hold '//'");
    }
    if key.contains(STAGING) {
        return bad("names holding \".freight-staging-\" are reserved for writes in progress");
    }
    Ok(())
}

/// The segments of a prefix given in a URL or by the user ("a/b/" -> ["a", "b"]).
pub fn prefix_segments(prefix: &str) -> Vec<String> {
    prefix
        .split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The object path of `key` under the store's prefix segments.
pub fn to_path(prefix: &[String], key: &str) -> Path {
    // Each raw segment becomes one encoded PathPart.
    Path::from_iter(
        prefix
            .iter()
            .map(String::as_str)
            .chain(key.split('/'))
            .map(PathPart::from),
    )
}

/// The object path of a folder given as raw segments (None for the root).
pub fn folder(segments: &[String]) -> Option<Path> {
    (!segments.is_empty())
        .then(|| Path::from_iter(segments.iter().map(|s| PathPart::from(s.as_str()))))
}

/// The key of an object path under the prefix, or None when the path is not under it.
pub fn from_path(prefix: &[String], path: &Path) -> Option<String> {
    let mut parts = path.parts();
    for segment in prefix {
        let part = parts.next()?;
        if decode(part.as_ref()) != *segment {
            return None;
        }
    }
    let rest: Vec<String> = parts.map(|p| decode(p.as_ref())).collect();
    (!rest.is_empty()).then(|| rest.join("/"))
}

fn decode(segment: &str) -> String {
    percent_decode_str(segment).decode_utf8_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn awkward_keys_round_trip() {
        let prefix = prefix_segments("runs/3/");
        for key in [
            "_test_storage.<locals>.sum_0000",
            "a b#c%d",
            "dir/x?y*z",
            "%41",
            "k#12",
            "é/ü",
            "a/../b",
        ] {
            let path = to_path(&prefix, key);
            assert_eq!(from_path(&prefix, &path).as_deref(), Some(key), "{path}");
        }
        assert_eq!(from_path(&prefix, &Path::from("other/x")), None);
    }

    #[test]
    fn bad_keys_are_refused() {
        for key in ["", "/a", "a/", "a//b"] {
            assert!(check(key).is_err(), "{key:?}");
        }
        check("a/b").unwrap();
    }
}
