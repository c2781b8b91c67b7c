//! A [`Store`] on an S3-compatible object store (`s3://bucket/prefix`), through the
//! `object_store` crate.
//!
//! - **Credentials and endpoint** come from the usual AWS variables only
//!   (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`,
//!   `AWS_ENDPOINT_URL`, ...), read by [`AmazonS3Builder::from_env`]; they are never printed.
//!   An `http://` endpoint (a local S3-compatible server) is allowed without `AWS_ALLOW_HTTP`.
//! - **Commit point:** [`Store::put_new`] is a conditional create (`PutMode::Create`, an
//!   `If-None-Match: *` PUT), so two writers racing for one log version cannot both win,
//!   without any lock.
//! - **Whole objects:** a PUT is atomic on S3 (readers see the old object, or none, or the
//!   whole new one), so [`Store::put`] needs no temporary object.
//! - **Streamed files** ([`Store::create_temp`]) are written to a local temporary file and
//!   uploaded (in parts when large) by the [`rename`](Store::rename) that puts them in place;
//!   until then only this process sees them.
//! - **Reads by range:** the lake's Parquet readers ask [`Store::get_tail`] (the footer: one
//!   suffix-range GET, which also tells the object's size) and [`Store::get_ranges`] (the
//!   column chunks they decode: ranged GETs, neighbours closer than [`COALESCE_GAP`] merged
//!   into one, up to [`RANGES_IN_FLIGHT`] requests at once). [`Store::open_read`] downloads
//!   the whole object into an anonymous local file, in one request and without holding it in
//!   memory, for the readers that need every byte (compaction, the deep verify). (Scans do not
//!   go through the store: polars reads the objects itself, by ranges.)
//! - **Counted:** every GET's request and bytes are added to the handle's
//!   [`TransferStats`].
//!
//! The store's calls block the calling thread on a runtime of their own, so they work from
//! plain threads, rayon workers and async tasks alike.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as ObjectPath;
use object_store::{
    GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
    WriteMultipart,
};

use super::{Store, TransferStats};
use crate::lake::layout::{check_path, temp_name};
use crate::{Error, Result};

/// Size of the parts of a multipart upload, and the size from which a streamed file is
/// uploaded in parts rather than in one PUT.
const PART_BYTES: usize = 16 << 20;

/// Ranges of one object closer than this are fetched by one request (the bytes between them
/// travel too). Small, so that what travels is what a reader decodes: the column chunks it
/// skips between two it reads are mostly larger (a row group of the lake's files holds tens
/// of thousands of rows), and requests of one read run side by side.
pub const COALESCE_GAP: u64 = 8 << 10;

/// Ranged requests of one [`Store::get_ranges`] call in flight at once.
pub const RANGES_IN_FLIGHT: usize = 8;

/// The GETs of a store and their bytes, shared by the clones of its lake handle.
#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    bytes: AtomicU64,
}

impl Counters {
    fn add(&self, bytes: usize) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// A request whose body is counted as it arrives ([`Counters::add_bytes`]).
    fn add_request(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    fn add_bytes(&self, bytes: usize) {
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }
}

/// The ranges to request for `ranges` (sorted by start): each range once, those closer than
/// `gap` merged.
fn merged(ranges: &[Range<u64>], gap: u64) -> Vec<Range<u64>> {
    let mut sorted: Vec<Range<u64>> = ranges.iter().filter(|r| r.end > r.start).cloned().collect();
    sorted.sort_unstable_by_key(|r| r.start);
    let mut out: Vec<Range<u64>> = Vec::with_capacity(sorted.len());
    for r in sorted {
        match out.last_mut() {
            Some(last) if r.start <= last.end.saturating_add(gap) => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}

/// The runtime every object store's requests run on: two workers, started on first use and
/// never dropped (dropping a runtime inside an async task would panic).
fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("dexlake-object-store")
            .enable_all()
            .build()
            .expect("the object store's runtime starts")
    })
}

/// Runs `fut` on the store's runtime and waits for it on this thread.
fn block_on<T: Send + 'static>(
    fut: impl std::future::Future<Output = T> + Send + 'static,
) -> Result<T> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    runtime().spawn(async move {
        // The receiver is gone only if the caller panicked; nothing to report then.
        let _ = tx.send(fut.await);
    });
    rx.recv()
        .map_err(|_| Error::Config("the object store's runtime stopped before answering".into()))
}

/// A lake root that is an object-store URL, split into its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRoot {
    /// The bucket.
    pub bucket: String,
    /// The prefix inside the bucket, without leading or trailing `/` (may be empty).
    pub prefix: String,
}

impl ObjectRoot {
    /// Parses a lake root: `Ok(Some(..))` for `s3://bucket[/prefix]`, `Ok(None)` for a local
    /// path, and an error for another URL scheme or a malformed `s3://` URL.
    pub fn parse(root: &str) -> Result<Option<ObjectRoot>> {
        let Some((scheme, rest)) = root.split_once("://") else {
            return Ok(None);
        };
        if !scheme.eq_ignore_ascii_case("s3") && !scheme.eq_ignore_ascii_case("s3a") {
            return Err(Error::Config(format!(
                "lake root {root:?}: only local folders and s3:// URLs are supported, not {scheme}://"
            )));
        }
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() || bucket.contains(['?', '#', '@']) {
            return Err(Error::Config(format!(
                "lake root {root:?}: expected s3://bucket/prefix"
            )));
        }
        let prefix = prefix.trim_matches('/');
        if prefix
            .split('/')
            .any(|s| s == "." || s == ".." || (s.is_empty() && !prefix.is_empty()))
            || prefix.contains('=')
        {
            return Err(Error::Config(format!(
                "lake root {root:?}: the prefix must be plain folder names (no empty, `.`, `..` segments and no `=`, which hive readers take for a partition column)"
            )));
        }
        Ok(Some(ObjectRoot {
            bucket: bucket.to_owned(),
            prefix: prefix.to_owned(),
        }))
    }

    /// The root as a URL, `s3://bucket/prefix`.
    pub fn url(&self) -> String {
        if self.prefix.is_empty() {
            format!("s3://{}", self.bucket)
        } else {
            format!("s3://{}/{}", self.bucket, self.prefix)
        }
    }
}

/// A [`Store`] on an S3-compatible object store.
pub struct ObjectStoreLake {
    root: ObjectRoot,
    store: Arc<dyn ObjectStore>,
    /// Added to every error when the environment names no credentials.
    hint: &'static str,
    /// Streamed files not yet uploaded, by their temporary lake path.
    temps: Mutex<HashMap<String, tempfile::TempPath>>,
    /// What the GETs fetched.
    counters: Counters,
}

impl std::fmt::Debug for ObjectStoreLake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The client holds credentials: only the root is shown.
        f.debug_struct("ObjectStoreLake")
            .field("root", &self.root.url())
            .finish_non_exhaustive()
    }
}

impl ObjectStoreLake {
    /// Connects to the bucket of `root` with the credentials, region and endpoint of the
    /// environment's AWS variables. No request is sent yet.
    pub fn from_env(root: ObjectRoot) -> Result<ObjectStoreLake> {
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(&root.bucket);
        let endpoint = builder.get_config_value(&AmazonS3ConfigKey::Endpoint);
        if endpoint.is_some_and(|e| e.starts_with("http://")) {
            builder = builder.with_allow_http(true);
        }
        let store = builder.build().map_err(|e| {
            Error::Config(format!(
                "connecting to {}: {e} (set AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION and, for another S3-compatible server, AWS_ENDPOINT_URL)",
                root.url()
            ))
        })?;
        let named = [
            "AWS_ACCESS_KEY_ID",
            "AWS_WEB_IDENTITY_TOKEN_FILE",
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        ];
        let hint = if named.iter().any(|v| std::env::var_os(v).is_some()) {
            ""
        } else {
            " (no credentials in the environment: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, and AWS_ENDPOINT_URL for a server other than AWS)"
        };
        Ok(ObjectStoreLake {
            root,
            store: Arc::new(store),
            hint,
            temps: Mutex::default(),
            counters: Counters::default(),
        })
    }

    /// The lake's root.
    pub fn root(&self) -> &ObjectRoot {
        &self.root
    }

    /// The object key of a checked lake path.
    fn key(&self, path: &str) -> Result<ObjectPath> {
        check_path(path)?;
        Ok(self.key_unchecked(path))
    }

    fn key_unchecked(&self, path: &str) -> ObjectPath {
        if self.root.prefix.is_empty() {
            ObjectPath::from(path)
        } else {
            ObjectPath::from(format!("{}/{path}", self.root.prefix))
        }
    }

    fn err(&self, path: &str, source: object_store::Error) -> Error {
        Error::Lake {
            path: self.location(path),
            message: format!("{source}{}", self.hint),
        }
    }

    fn temps(&self) -> std::sync::MutexGuard<'_, HashMap<String, tempfile::TempPath>> {
        self.temps
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Uploads the local file at `local` to `key`: one PUT when small, parts otherwise.
    fn upload(&self, local: &std::path::Path, key: ObjectPath, to: &str) -> Result<()> {
        let mut file = File::open(local).map_err(|e| Error::io("opening", local, e))?;
        let size = file
            .metadata()
            .map_err(|e| Error::io("inspecting", local, e))?
            .len();
        let store = Arc::clone(&self.store);
        if size <= PART_BYTES as u64 {
            let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
            file.read_to_end(&mut data)
                .map_err(|e| Error::io("reading", local, e))?;
            return block_on(async move { store.put(&key, PutPayload::from(data)).await })?
                .map(|_| ())
                .map_err(|e| self.err(to, e));
        }
        let path = local.to_path_buf();
        // The parts are sent from inside the runtime (they are its tasks); at most two are in
        // flight, so memory stays bounded whatever the file's size.
        let uploaded = block_on(async move {
            let upload = store.put_multipart(&key).await.map_err(Transfer::Store)?;
            let mut parts = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
            let mut buf = vec![0u8; PART_BYTES];
            loop {
                let n = match file.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) => {
                        parts.abort().await.map_err(Transfer::Store)?;
                        return Err(Transfer::Io(e));
                    }
                };
                parts.write(&buf[..n]);
                parts.wait_for_capacity(2).await.map_err(Transfer::Store)?;
            }
            parts.finish().await.map_err(Transfer::Store)
        })?;
        match uploaded {
            Ok(_) => Ok(()),
            Err(Transfer::Io(e)) => Err(Error::io("reading", path, e)),
            Err(Transfer::Store(e)) => Err(self.err(to, e)),
        }
    }

    /// Every object under `prefix` (all of the root's when empty) with its size, from one
    /// listing (its list requests), by lake path; with `offset`, only the keys after it, which
    /// the server skips itself (`start-after`).
    fn listing(&self, prefix: &str, offset: Option<ObjectPath>) -> Result<BTreeMap<String, u64>> {
        if !prefix.is_empty() {
            check_path(prefix)?;
        }
        let full = match (self.root.prefix.is_empty(), prefix.is_empty()) {
            (true, true) => None,
            (true, false) => Some(ObjectPath::from(prefix)),
            (false, true) => Some(ObjectPath::from(self.root.prefix.as_str())),
            (false, false) => Some(ObjectPath::from(format!("{}/{prefix}", self.root.prefix))),
        };
        let store = Arc::clone(&self.store);
        let metas = block_on(async move {
            let listing = match &offset {
                Some(offset) => store.list_with_offset(full.as_ref(), offset),
                None => store.list(full.as_ref()),
            };
            listing.try_collect::<Vec<object_store::ObjectMeta>>().await
        })?
        .map_err(|e| {
            self.err(
                if prefix.is_empty() {
                    "_dexlake"
                } else {
                    prefix
                },
                e,
            )
        })?;
        let strip = if self.root.prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", self.root.prefix)
        };
        Ok(metas
            .into_iter()
            .filter_map(|m| {
                let path = m.location.as_ref().strip_prefix(&strip)?.to_owned();
                Some((path, m.size))
            })
            .collect())
    }
}

/// Why a transfer between a local file and the store failed: the local file or the store.
enum Transfer {
    Io(std::io::Error),
    Store(object_store::Error),
}

impl Store for ObjectStoreLake {
    fn put(&self, path: &str, data: &[u8]) -> Result<()> {
        let key = self.key(path)?;
        let store = Arc::clone(&self.store);
        let payload = PutPayload::from(Bytes::copy_from_slice(data));
        block_on(async move { store.put(&key, payload).await })?
            .map(|_| ())
            .map_err(|e| self.err(path, e))
    }

    fn put_new(&self, path: &str, data: &[u8]) -> Result<bool> {
        let key = self.key(path)?;
        let store = Arc::clone(&self.store);
        let payload = PutPayload::from(Bytes::copy_from_slice(data));
        let opts = PutOptions::from(PutMode::Create);
        match block_on(async move { store.put_opts(&key, payload, opts).await })? {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(self.err(path, e)),
        }
    }

    fn get(&self, path: &str) -> Result<Vec<u8>> {
        let key = self.key(path)?;
        let store = Arc::clone(&self.store);
        let data = block_on(async move {
            match store.get(&key).await {
                Ok(r) => r.bytes().await,
                Err(e) => Err(e),
            }
        })?
        .map_err(|e| self.err(path, e))?;
        self.counters.add(data.len());
        Ok(data.to_vec())
    }

    fn reads_by_range(&self) -> bool {
        true
    }

    fn get_tail(&self, path: &str, n: u64) -> Result<(u64, Bytes)> {
        let key = self.key(path)?;
        if let Some(local) = self.temps().get(path) {
            let file =
                File::open(local).map_err(|e| Error::io("opening", local.to_path_buf(), e))?;
            return super::tail_of(&file, n)
                .map_err(|e| Error::io("reading", local.to_path_buf(), e));
        }
        let store = Arc::clone(&self.store);
        let options = GetOptions::new().with_range(Some(GetRange::Suffix(n.max(1))));
        let (size, tail) = block_on(async move {
            let got = store.get_opts(&key, options).await?;
            let size = got.meta.size;
            Ok::<_, object_store::Error>((size, got.bytes().await?))
        })?
        .map_err(|e| self.err(path, e))?;
        self.counters.add(tail.len());
        Ok((size, tail))
    }

    fn get_ranges(&self, path: &str, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let key = self.key(path)?;
        if let Some(local) = self.temps().get(path) {
            let file =
                File::open(local).map_err(|e| Error::io("opening", local.to_path_buf(), e))?;
            return super::ranges_of(&file, ranges)
                .map_err(|e| Error::io("reading", local.to_path_buf(), e));
        }
        if ranges.is_empty() {
            return Ok(Vec::new());
        }
        let requests = merged(ranges, COALESCE_GAP);
        let store = Arc::clone(&self.store);
        let asked = requests.clone();
        let fetched: Vec<Bytes> = block_on(async move {
            futures::stream::iter(asked)
                .map(|r| {
                    let store = Arc::clone(&store);
                    let key = key.clone();
                    async move { store.get_range(&key, r).await }
                })
                .buffered(RANGES_IN_FLIGHT)
                .try_collect()
                .await
        })?
        .map_err(|e| self.err(path, e))?;
        for bytes in &fetched {
            self.counters.add(bytes.len());
        }
        ranges
            .iter()
            .map(|r| {
                if r.end <= r.start {
                    return Ok(Bytes::new());
                }
                let k = requests.partition_point(|q| q.start <= r.start) - 1;
                let (request, bytes) = (&requests[k], &fetched[k]);
                let (from, to) = (r.start - request.start, r.end - request.start);
                if to > bytes.len() as u64 {
                    return Err(Error::Lake {
                        path: self.location(path),
                        message: format!(
                            "bytes {}..{} asked, the object ends at {}: it changed or is shorter than its footer says",
                            r.start,
                            r.end,
                            request.start + bytes.len() as u64
                        ),
                    });
                }
                Ok(bytes.slice(from as usize..to as usize))
            })
            .collect()
    }

    fn transfer_stats(&self) -> TransferStats {
        TransferStats {
            get_requests: self.counters.requests.load(Ordering::Relaxed),
            get_bytes: self.counters.bytes.load(Ordering::Relaxed),
        }
    }

    fn open_read(&self, path: &str) -> Result<File> {
        let key = self.key(path)?;
        if let Some(local) = self.temps().get(path) {
            return File::open(local).map_err(|e| Error::io("opening", local.to_path_buf(), e));
        }
        // Streamed to an anonymous local file (gone when closed): one request per object, and
        // the Parquet reader then reads its pages by offset without holding the whole object.
        let mut file = tempfile::tempfile()
            .map_err(|e| Error::io("creating a temporary file in", std::env::temp_dir(), e))?;
        let store = Arc::clone(&self.store);
        self.counters.add_request();
        let (back, fetched, received) = block_on(async move {
            let mut received = 0;
            let fetched = async {
                let mut stream = store
                    .get(&key)
                    .await
                    .map_err(Transfer::Store)?
                    .into_stream();
                while let Some(chunk) = stream.try_next().await.map_err(Transfer::Store)? {
                    received += chunk.len();
                    file.write_all(&chunk).map_err(Transfer::Io)?;
                }
                file.seek(SeekFrom::Start(0)).map_err(Transfer::Io)?;
                Ok(())
            }
            .await;
            (file, fetched, received)
        })?;
        self.counters.add_bytes(received);
        match fetched {
            Ok(()) => Ok(back),
            Err(Transfer::Io(e)) => Err(Error::io(
                "writing a temporary file in",
                std::env::temp_dir(),
                e,
            )),
            Err(Transfer::Store(e)) => Err(self.err(path, e)),
        }
    }

    fn create_temp(&self, path: &str) -> Result<File> {
        check_path(path)?;
        let temp = tempfile::Builder::new()
            .prefix(".dexlake-upload-")
            .tempfile()
            .map_err(|e| Error::io("creating a temporary file in", std::env::temp_dir(), e))?;
        let (file, local) = temp.into_parts();
        self.temps().insert(temp_name(path), local);
        Ok(file)
    }

    fn head(&self, path: &str) -> Result<Option<u64>> {
        let key = self.key(path)?;
        if let Some(local) = self.temps().get(path) {
            return Ok(Some(
                std::fs::metadata(local)
                    .map_err(|e| Error::io("inspecting", local.to_path_buf(), e))?
                    .len(),
            ));
        }
        let store = Arc::clone(&self.store);
        match block_on(async move { store.head(&key).await })? {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.err(path, e)),
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        Ok(self.listing(prefix, None)?.into_keys().collect())
    }

    fn sizes(&self, prefix: &str, paths: &[&str]) -> Result<BTreeMap<String, u64>> {
        let mut listed = self.listing(prefix, None)?;
        Ok(paths
            .iter()
            .filter_map(|&p| listed.remove_entry(p))
            .collect())
    }

    fn list_after(&self, prefix: &str, after: &str) -> Result<Vec<String>> {
        check_path(after)?;
        Ok(self
            .listing(prefix, Some(self.key_unchecked(after)))?
            .into_keys()
            .collect())
    }

    fn rename(&self, from: &str, to: &str) -> Result<()> {
        check_path(from)?;
        let to_key = self.key(to)?;
        let local = self.temps().remove(from);
        if let Some(local) = local {
            // A streamed file: uploaded now; the local file goes with `local`.
            return self.upload(&local, to_key, to);
        }
        let from_key = self.key_unchecked(from);
        let store = Arc::clone(&self.store);
        block_on(async move { store.rename(&from_key, &to_key).await })?
            .map_err(|e| self.err(from, e))
    }

    fn delete(&self, path: &str) -> Result<()> {
        let key = self.key(path)?;
        if self.temps().remove(path).is_some() {
            return Ok(());
        }
        let store = Arc::clone(&self.store);
        match block_on(async move { store.delete(&key).await })? {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.err(path, e)),
        }
    }

    fn location(&self, path: &str) -> PathBuf {
        PathBuf::from(format!("{}/{path}", self.root.url()))
    }

    fn has_writer_lock(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_parse() {
        assert_eq!(ObjectRoot::parse("/tmp/lake").expect("local"), None);
        assert_eq!(ObjectRoot::parse("lake").expect("local"), None);
        let r = ObjectRoot::parse("s3://bucket/some/prefix/")
            .expect("s3")
            .expect("object root");
        assert_eq!(r.bucket, "bucket");
        assert_eq!(r.prefix, "some/prefix");
        assert_eq!(r.url(), "s3://bucket/some/prefix");
        let bare = ObjectRoot::parse("s3://bucket").expect("s3").expect("root");
        assert_eq!(bare.prefix, "");
        assert_eq!(bare.url(), "s3://bucket");
        for bad in [
            "gs://bucket/x",
            "http://host/x",
            "s3://",
            "s3:///x",
            "s3://b/a//c",
            "s3://b/../c",
            "s3://b/date=2024-01-01",
        ] {
            assert!(ObjectRoot::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_debug_form_shows_no_credentials() {
        // The builder takes the keys directly: no environment variable is changed.
        let store = AmazonS3Builder::new()
            .with_bucket_name("b")
            .with_access_key_id("AKIDSECRETVALUE")
            .with_secret_access_key("super-secret")
            .with_region("us-east-1")
            .build()
            .expect("builder");
        let lake = ObjectStoreLake {
            root: ObjectRoot {
                bucket: "b".into(),
                prefix: "p".into(),
            },
            store: Arc::new(store),
            hint: "",
            temps: Mutex::default(),
            counters: Counters::default(),
        };
        let shown = format!("{lake:?}");
        assert!(!shown.contains("super-secret") && !shown.contains("AKIDSECRETVALUE"));
        assert!(shown.contains("s3://b/p"));
        let mut f = lake
            .create_temp("swaps/chain=altchain/date=2024-01-01/part-1.parquet")
            .expect("temp");
        f.write_all(b"PAR1").expect("write");
        assert_eq!(
            lake.head("swaps/chain=altchain/date=2024-01-01/.part-1.parquet.tmp")
                .expect("head of a local temp"),
            Some(4)
        );
        lake.delete("swaps/chain=altchain/date=2024-01-01/.part-1.parquet.tmp")
            .expect("delete a local temp");
    }
}
