//! Opening a store from a URL: `file://./results` or a plain path (a local folder, created if
//! missing), `memory://`, `s3://bucket/prefix` (the standard AWS environment variables, or
//! explicit options).

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, S3CopyIfNotExists};
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::{BackoffConfig, ClientOptions, RetryConfig};

use crate::error::{Error, Result};
use crate::keys;
use crate::store::{Backend, Client, Store};
use freight_core::fork::PerProcess;
use object_store::ObjectStore;

/// Options of `open` (all optional; S3 ones fall back to the AWS environment variables).
#[derive(Debug, Default, Clone)]
pub struct Options {
    pub endpoint_url: Option<String>,
    pub region: Option<String>,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub session_token: Option<String>,
    pub allow_http: Option<bool>,
    /// Retries of a failed request (with exponential backoff).
    pub max_retries: Option<usize>,
    /// Timeout of one request.
    pub timeout: Option<Duration>,
    pub connect_timeout: Option<Duration>,
}

fn bad(url: &str, why: impl Into<String>) -> Error {
    Error::BadUrl {
        url: url.to_owned(),
        why: why.into(),
    }
}

impl Store {
    pub fn open(url: &str, options: &Options) -> Result<Store> {
        if let Some(rest) = url.strip_prefix("memory://") {
            return Ok(Store {
                client: Client::Shared(Arc::new(InMemory::new())),
                local: None,
                prefix: keys::prefix_segments(rest),
                url: url.to_owned(),
                backend: Backend::Memory,
            });
        }
        if let Some(rest) = url.strip_prefix("s3://") {
            return open_s3(url, rest, options);
        }
        let path = url.strip_prefix("file://").unwrap_or(url);
        if path.is_empty() {
            return Err(bad(url, "a local store needs a folder path"));
        }
        if url.contains("://") && !url.starts_with("file://") {
            return Err(bad(
                url,
                "unknown scheme; use file://PATH (or a plain path), memory:// or s3://BUCKET/PREFIX",
            ));
        }
        std::fs::create_dir_all(path)
            .map_err(|e| bad(url, format!("cannot create the folder {path:?}: {e}")))?;
        let local = LocalFileSystem::new_with_prefix(path)
            .map_err(|e| bad(url, e.to_string()))?
            .with_fsync(true)
            .with_automatic_cleanup(true);
        let local = Arc::new(local);
        let root = std::fs::canonicalize(path).map_err(|e| bad(url, e.to_string()))?;
        Ok(Store {
            client: Client::Shared(local.clone()),
            local: Some(local),
            prefix: Vec::new(),
            url: format!("file://{}", root.display()),
            backend: Backend::Local,
        })
    }
}

fn open_s3(url: &str, rest: &str, o: &Options) -> Result<Store> {
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(bad(url, "an S3 URL names a bucket: s3://BUCKET/PREFIX"));
    }
    let mut builder = AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .with_copy_if_not_exists(S3CopyIfNotExists::Multipart);
    // boto3's variable for the endpoint (object_store reads AWS_ENDPOINT).
    if std::env::var_os("AWS_ENDPOINT").is_none() {
        if let Ok(endpoint) = std::env::var("AWS_ENDPOINT_URL") {
            builder = builder.with_endpoint(endpoint);
        }
    }
    if let Some(v) = &o.endpoint_url {
        builder = builder.with_endpoint(v);
    }
    if let Some(v) = &o.region {
        builder = builder.with_region(v);
    }
    if let Some(v) = &o.access_key_id {
        builder = builder.with_access_key_id(v);
    }
    if let Some(v) = &o.secret_access_key {
        builder = builder.with_secret_access_key(v);
    }
    if let Some(v) = &o.session_token {
        builder = builder.with_token(v);
    }
    let mut client = ClientOptions::new()
        .with_timeout(o.timeout.unwrap_or(Duration::from_secs(60)))
        .with_connect_timeout(o.connect_timeout.unwrap_or(Duration::from_secs(5)));
    let allow_http = o.allow_http.unwrap_or_else(|| {
        std::env::var("AWS_ALLOW_HTTP").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
    });
    client = client.with_allow_http(allow_http);
    builder = builder.with_client_options(client).with_retry(RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            base: 2.0,
        },
        max_retries: o.max_retries.unwrap_or(5),
        retry_timeout: Duration::from_secs(120),
    });
    let store = builder
        .clone()
        .build()
        .map_err(|e| bad(url, e.to_string()))?;
    let store: Arc<dyn ObjectStore> = Arc::new(store);
    Ok(Store {
        client: Client::Connected {
            client: PerProcess::with(store),
            settings: Box::new(builder),
        },
        local: None,
        prefix: keys::prefix_segments(prefix),
        url: url.trim_end_matches('/').to_owned(),
        backend: Backend::S3,
    })
}
