//! Storage errors. Each says which store (its URL) and which key, and what to check; the
//! bindings map `NotFound` to `freight.KeyNotFoundError`, `AlreadyExists` to
//! `freight.KeyExistsError` and the rest to `freight.StorageError`.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{url}: no value is stored under {key:?}")]
    NotFound { url: String, key: String },

    #[error(
        "{url}: a value is already stored under {key:?} and if_absent=True refuses to replace it"
    )]
    AlreadyExists { url: String, key: String },

    #[error("invalid key {key:?}: {why}")]
    BadKey { key: String, why: &'static str },

    #[error("cannot open store {url:?}: {why}")]
    BadUrl { url: String, why: String },

    #[error("{url}: the value under {key:?} was replaced while it was being read in parts; open it again (freight.lazy or Store.lazy) to read the new value")]
    Changed { url: String, key: String },

    #[error("{url}: {what} is only possible on a local folder store (file://)")]
    NotLocal { url: String, what: &'static str },

    #[error("{url}: {op} {key:?} failed: {message}{hint}")]
    Backend {
        url: String,
        op: &'static str,
        key: String,
        message: String,
        /// What to check, for the backends where a failure usually means a setting.
        hint: &'static str,
    },
}

pub type Result<T> = std::result::Result<T, Error>;
