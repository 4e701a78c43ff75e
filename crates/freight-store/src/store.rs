//! `Store`: one object_store backend (local folder, memory or S3) under a key prefix, with the
//! operations freight needs, run to completion on the crate's own tokio runtime (callers release
//! the GIL around them). Writes are atomic: a reader sees the old value or the whole new one.

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use freight_core::fork::PerProcess;
use futures::{StreamExt, TryStreamExt};
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, WriteMultipart};

use crate::error::{Error, Result};
use crate::keys;

/// Payloads up to this size are written with one PUT; larger ones stream in parts.
pub const SINGLE_PUT_MAX: usize = 16 << 20;
/// Size of each part of a streamed upload (S3 needs at least 5 MiB).
pub const PART: usize = 8 << 20;
/// Parts in flight at once during a streamed upload.
const PARTS_IN_FLIGHT: usize = 4;
/// Objects from this size are read as parallel ranges of this size.
pub const RANGE: u64 = 16 << 20;
/// Ranged reads in flight at once.
pub(crate) const RANGES_IN_FLIGHT: usize = 8;
/// Local values from this size are mapped rather than read by `get`.
const MAP_MIN: u64 = 1 << 20;
/// Staging files older than this that a crashed writer left behind are removed by the next
/// write of the same key (younger ones may belong to a writer still at work).
const STALE: Duration = Duration::from_secs(600);

/// The storage runtime of this process (a forked child builds its own: the parent's worker
/// threads do not exist there; see freight_core::fork).
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: PerProcess<tokio::runtime::Runtime> = PerProcess::new();
    RUNTIME.get_or_init(|| {
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 8));
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("freight-store")
            .enable_all()
            .build()
            .expect("the storage runtime starts")
    })
}

/// Runs a future to completion on the storage runtime.
pub(crate) fn block_on<F: std::future::Future>(future: F) -> F::Output {
    runtime().block_on(future)
}

/// Called with (bytes just done, total bytes) as a save or load makes progress.
pub type Progress<'a> = &'a (dyn Fn(u64, u64) + Sync);

/// A `Progress` that ignores everything.
pub fn no_progress(_: u64, _: u64) {}

/// What `head` knows of a stored value.
#[derive(Debug, Clone)]
pub struct Meta {
    pub key: String,
    pub size: u64,
    /// Seconds since the Unix epoch.
    pub modified: f64,
    /// The backend's version tag of the stored bytes (S3's ETag; a local file's is derived
    /// from its inode, size and mtime), when it has one.
    pub etag: Option<String>,
}

/// Which kind of backend a store is, for error hints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Local,
    Memory,
    S3,
}

impl Backend {
    pub fn hint(self) -> &'static str {
        match self {
            Backend::S3 => {
                "; check the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), the endpoint \
                 (AWS_ENDPOINT_URL; AWS_ALLOW_HTTP=true for http://) and that the bucket exists"
            }
            Backend::Local => "; check that the folder exists and is writable",
            Backend::Memory => "",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Backend::Local => "file",
            Backend::Memory => "memory",
            Backend::S3 => "s3",
        }
    }
}

/// A stored value's bytes: read into memory, or mapped from a local file.
pub enum Stored {
    Bytes(Bytes),
    Mapped(memmap2::Mmap),
}

impl AsRef<[u8]> for Stored {
    fn as_ref(&self) -> &[u8] {
        match self {
            Stored::Bytes(b) => b,
            Stored::Mapped(m) => m,
        }
    }
}

/// A backend's client. An S3 client holds pooled connections driven by tasks of the runtime
/// it ran on, which a forked child does not have: each process builds its own from the same
/// settings. Local folders and memory hold no connection and are shared as they are.
pub(crate) enum Client {
    Shared(Arc<dyn ObjectStore>),
    Connected {
        client: PerProcess<Arc<dyn ObjectStore>>,
        settings: Box<object_store::aws::AmazonS3Builder>,
    },
}

impl Client {
    fn get(&self) -> object_store::Result<&Arc<dyn ObjectStore>> {
        match self {
            Client::Shared(store) => Ok(store),
            Client::Connected { client, settings } => client.get_or_try_init(|| {
                let store: Arc<dyn ObjectStore> = Arc::new(settings.as_ref().clone().build()?);
                Ok(store)
            }),
        }
    }
}

pub struct Store {
    pub(crate) client: Client,
    /// The concrete local store, for mmap and the staging-file sweep.
    pub(crate) local: Option<Arc<LocalFileSystem>>,
    pub(crate) prefix: Vec<String>,
    pub(crate) url: String,
    pub(crate) backend: Backend,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Store({})", self.url)
    }
}

impl Store {
    pub fn url(&self) -> &str {
        &self.url
    }

    /// "file", "memory" or "s3".
    pub fn backend_name(&self) -> &'static str {
        self.backend.name()
    }

    pub fn is_local(&self) -> bool {
        self.local.is_some()
    }

    /// This process's client of the backend.
    pub(crate) fn inner(&self) -> object_store::Result<&Arc<dyn ObjectStore>> {
        self.client.get()
    }

    pub(crate) fn path(&self, key: &str) -> Result<Path> {
        keys::check(key)?;
        Ok(keys::to_path(&self.prefix, key))
    }

    /// The backend's name for `key`: its object path under the store's prefix, each segment
    /// percent-encoded as `keys` encodes it (the object key on S3; the file's path relative to
    /// the folder of a local store). Writers that reach the backend by other means (a library
    /// writing files into a local folder, s3fs) use it to write where the store lists.
    pub fn object_path(&self, key: &str) -> Result<String> {
        Ok(self.path(key)?.to_string())
    }

    /// The file that holds `key` in a local folder store (None on other backends).
    pub fn local_path(&self, key: &str) -> Result<Option<std::path::PathBuf>> {
        let Some(local) = &self.local else {
            return Ok(None);
        };
        let path = self.path(key)?;
        local
            .path_to_filesystem(&path)
            .map(Some)
            .map_err(|e| self.err("locate", key, e))
    }

    pub(crate) fn err(&self, op: &'static str, key: &str, err: object_store::Error) -> Error {
        if self.is_local() && below_a_file(&err) {
            // "a/b" when "a" is a stored value: no value is stored under "a/b".
            return Error::NotFound {
                url: self.url.clone(),
                key: key.to_owned(),
            };
        }
        match err {
            object_store::Error::NotFound { .. } => Error::NotFound {
                url: self.url.clone(),
                key: key.to_owned(),
            },
            object_store::Error::AlreadyExists { .. } => Error::AlreadyExists {
                url: self.url.clone(),
                key: key.to_owned(),
            },
            other => Error::Backend {
                url: self.url.clone(),
                op,
                key: key.to_owned(),
                message: other.to_string(),
                hint: self.backend.hint(),
            },
        }
    }

    /// Writes the concatenation of `parts` under `key`, atomically; with `if_absent`, only if
    /// nothing is stored there (`AlreadyExists` otherwise). Small values go in one PUT; large
    /// ones stream in parts (a multipart upload, or a staged file renamed into place), never
    /// assembled in memory as a whole.
    pub fn put(
        &self,
        key: &str,
        parts: &[&[u8]],
        if_absent: bool,
        progress: Progress<'_>,
    ) -> Result<()> {
        let path = self.path(key)?;
        self.sweep_staging(&path);
        let total: usize = parts.iter().map(|p| p.len()).sum();
        if let Some(local) = &self.local {
            let file = local
                .path_to_filesystem(&path)
                .map_err(|e| self.err("save", key, e))?;
            let report = |n: usize| progress(n as u64, total as u64);
            return crate::local::put(&file, parts, if_absent, &report).map_err(|e| match e {
                crate::local::PutError::Exists => Error::AlreadyExists {
                    url: self.url.clone(),
                    key: key.to_owned(),
                },
                crate::local::PutError::Io(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::NotADirectory | std::io::ErrorKind::IsADirectory
                    ) =>
                {
                    Error::Backend {
                        url: self.url.clone(),
                        op: "save",
                        key: key.to_owned(),
                        message: format!(
                            "{e}: a local folder store cannot hold a value and a folder of values \
                             under one name (\"a\" and \"a/b\"); choose another key"
                        ),
                        hint: "",
                    }
                }
                crate::local::PutError::Io(e) => self.io_err("save", key, e),
            });
        }
        if total <= SINGLE_PUT_MAX {
            let mut data = Vec::with_capacity(total);
            for part in parts {
                data.extend_from_slice(part);
            }
            let mode = if if_absent {
                PutMode::Create
            } else {
                PutMode::Overwrite
            };
            let put = block_on(async {
                self.inner()?
                    .put_opts(&path, PutPayload::from(data), PutOptions::from(mode))
                    .await
            });
            progress(total as u64, total as u64);
            return put.map(|_| ()).map_err(|e| self.err("save", key, e));
        }
        if !if_absent {
            return block_on(self.upload(&path, parts, progress))
                .map_err(|e| self.err("save", key, e));
        }
        // Multipart uploads cannot be create-only: upload beside the key, then copy into place
        // only if the key is absent (a hard link locally, a conditional copy on S3).
        let staged = keys::to_path(&self.prefix, &format!("{key}{}{}", keys::STAGING, unique()));
        let result = block_on(async {
            self.upload(&staged, parts, progress).await?;
            let copied = self.inner()?.copy_if_not_exists(&staged, &path).await;
            let _ = self.inner()?.delete(&staged).await;
            copied
        });
        result.map_err(|e| self.err("save", key, e))
    }

    async fn upload(
        &self,
        path: &Path,
        parts: &[&[u8]],
        progress: Progress<'_>,
    ) -> object_store::Result<()> {
        let total = parts.iter().map(|p| p.len() as u64).sum();
        let upload = self.inner()?.put_multipart(path).await?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, PART);
        for part in parts {
            for chunk in part.chunks(PART) {
                if let Err(err) = writer.wait_for_capacity(PARTS_IN_FLIGHT).await {
                    let _ = writer.abort().await;
                    return Err(err);
                }
                writer.write(chunk);
                progress(chunk.len() as u64, total);
            }
        }
        writer.finish().await.map(|_| ())
    }

    /// The whole value: a local file of 1 MiB or more is mapped (reading it through the map
    /// costs the same one copy as a read, and lets read-only arrays view it), other values are
    /// read, as parallel ranges when they are large.
    pub fn get(&self, key: &str, progress: Progress<'_>) -> Result<Stored> {
        if self.is_local() {
            if let Ok(meta) = self.head(key) {
                if meta.size >= MAP_MIN {
                    return self.map(key);
                }
            }
        }
        let path = self.path(key)?;
        block_on(async {
            let inner = self.inner()?;
            let size = inner.head(&path).await?.size;
            if size < 2 * RANGE || self.is_local() {
                return Ok(Stored::Bytes(inner.get(&path).await?.bytes().await?));
            }
            let ranges: Vec<Range<u64>> = (0..size)
                .step_by(RANGE as usize)
                .map(|start| start..(start + RANGE).min(size))
                .collect();
            // One request per range, RANGES_IN_FLIGHT at a time, appended in order as they
            // arrive (object_store's get_ranges would merge adjacent ranges into one request).
            let mut chunks = futures::stream::iter(ranges)
                .map(|range| inner.get_range(&path, range))
                .buffered(RANGES_IN_FLIGHT);
            let mut out = Vec::with_capacity(size as usize);
            while let Some(chunk) = chunks.try_next().await? {
                out.extend_from_slice(&chunk);
                progress(chunk.len() as u64, size);
            }
            Ok(Stored::Bytes(Bytes::from(out)))
        })
        .map_err(|e| self.err("load", key, e))
    }

    /// Bytes `range` of a value (clipped to its end).
    pub fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes> {
        let path = self.path(key)?;
        block_on(async {
            let size = self.inner()?.head(&path).await?.size;
            let range = range.start.min(size)..range.end.min(size);
            if range.is_empty() {
                return Ok(Bytes::new());
            }
            self.inner()?.get_range(&path, range).await
        })
        .map_err(|e| self.err("load", key, e))
    }

    /// Maps a value of a local folder store into memory (read-only).
    pub fn map(&self, key: &str) -> Result<Stored> {
        let Some(local) = &self.local else {
            return Err(Error::NotLocal {
                url: self.url.clone(),
                what: "mmap=True",
            });
        };
        let path = self.path(key)?;
        let file_path = local
            .path_to_filesystem(&path)
            .map_err(|e| self.err("load", key, e))?;
        let file = std::fs::File::open(&file_path).map_err(|e| self.io_err("load", key, e))?;
        if file.metadata().is_ok_and(|m| m.is_dir()) {
            // A folder of other keys ("a" when "a/b" is stored) is not a value.
            return Err(Error::NotFound {
                url: self.url.clone(),
                key: key.to_owned(),
            });
        }
        // SAFETY: the file is replaced by rename, never written in place, so the mapped bytes
        // do not change under the reader (a writer's new value is a new inode).
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| self.io_err("load", key, e))?;
        Ok(Stored::Mapped(map))
    }

    fn io_err(&self, op: &'static str, key: &str, err: std::io::Error) -> Error {
        if matches!(
            err.kind(),
            std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
        ) {
            return Error::NotFound {
                url: self.url.clone(),
                key: key.to_owned(),
            };
        }
        Error::Backend {
            url: self.url.clone(),
            op,
            key: key.to_owned(),
            message: err.to_string(),
            hint: self.backend.hint(),
        }
    }

    pub(crate) fn meta(&self, key: &str, meta: &object_store::ObjectMeta) -> Meta {
        Meta {
            key: key.to_owned(),
            size: meta.size,
            modified: meta.last_modified.timestamp_micros() as f64 / 1e6,
            etag: meta.e_tag.clone(),
        }
    }

    pub fn head(&self, key: &str) -> Result<Meta> {
        let path = self.path(key)?;
        block_on(async { self.inner()?.head(&path).await })
            .map(|meta| self.meta(key, &meta))
            .map_err(|e| self.err("info", key, e))
    }

    pub fn exists(&self, key: &str) -> Result<bool> {
        match self.head(key) {
            Ok(_) => Ok(true),
            Err(Error::NotFound { .. }) => Ok(false),
            Err(err) => Err(err),
        }
    }

    pub fn delete(&self, key: &str) -> Result<()> {
        let path = self.path(key)?;
        block_on(async {
            // object_store's delete succeeds on a missing key on some backends: look first.
            self.inner()?.head(&path).await?;
            self.inner()?.delete(&path).await
        })
        .map_err(|e| self.err("delete", key, e))
    }

    /// Every stored value whose key starts with `prefix` (a plain string prefix), sorted.
    pub fn list(&self, prefix: &str) -> Result<Vec<Meta>> {
        // List the deepest folder the prefix names, then filter by the whole prefix.
        let folder = prefix.rfind('/').map_or("", |i| &prefix[..i]);
        let mut segments = self.prefix.clone();
        segments.extend(keys::prefix_segments(folder));
        let list_path = keys::folder(&segments);
        let metas: Vec<object_store::ObjectMeta> =
            block_on(async { self.inner()?.list(list_path.as_ref()).try_collect().await })
                .map_err(|e| self.err("list", prefix, e))?;
        let mut out: Vec<Meta> = metas
            .iter()
            .filter_map(|m| {
                let key = keys::from_path(&self.prefix, &m.location)?;
                (key.starts_with(prefix) && !is_staging(&key)).then(|| self.meta(&key, m))
            })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    /// Deletes every value whose key starts with `prefix`; returns how many.
    pub fn delete_prefix(&self, prefix: &str) -> Result<usize> {
        let metas = self.list(prefix)?;
        let paths: Vec<Path> = metas
            .iter()
            .map(|m| keys::to_path(&self.prefix, &m.key))
            .collect();
        let n = paths.len();
        block_on(async {
            let stream = futures::stream::iter(paths.into_iter().map(Ok)).boxed();
            self.inner()?
                .delete_stream(stream)
                .try_collect::<Vec<_>>()
                .await
        })
        .map_err(|e| self.err("delete", prefix, e))?;
        Ok(n)
    }

    /// Removes staging files (`<name>#<n>`) an interrupted local write left beside `path`.
    fn sweep_staging(&self, path: &Path) {
        let Some(local) = &self.local else { return };
        let Ok(file) = local.path_to_filesystem(path) else {
            return;
        };
        let (Some(dir), Some(name)) = (file.parent(), file.file_name().and_then(|n| n.to_str()))
        else {
            return;
        };
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let now = SystemTime::now();
        for entry in entries.flatten() {
            let entry_name = entry.file_name();
            let Some(rest) = entry_name
                .to_str()
                .and_then(|n| n.strip_prefix(name))
                .and_then(|r| r.strip_prefix('#'))
            else {
                continue;
            };
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| now.duration_since(t).is_ok_and(|age| age > STALE));
            if !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()) && old {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

/// Whether a local error is ENOTDIR: a path through a stored file, which holds no value.
fn below_a_file(err: &object_store::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(err);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return io.kind() == std::io::ErrorKind::NotADirectory;
        }
        source = e.source();
    }
    false
}

/// Keys of the temporary objects a create-only streamed write uses.
fn is_staging(key: &str) -> bool {
    key.rsplit('/')
        .next()
        .is_some_and(|name| name.contains(keys::STAGING))
}

fn unique() -> String {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{}-{nanos:x}", std::process::id())
}
