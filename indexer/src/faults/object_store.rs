//! The LanceDB tables' writes under the fault layer: an object-store
//! wrapper that LanceDB opens the tables with. Puts, multipart uploads,
//! deletes, copies and renames are counted and can fail; reads pass through.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use lance::io::WrappingObjectStore;
use object_store::list::PaginatedListStore;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, Result, UploadPart,
};

use super::FileOp;
use super::inject::decide;

/// The URI the tables are opened at under the fault layer: lance's
/// `file-object-store` scheme, which writes local files through the object
/// store like a remote one (the way lance tests its remote path locally).
pub(crate) fn table_uri(path: &str) -> crate::error::Result<String> {
    let absolute = std::path::absolute(path).map_err(crate::error::IndexerError::io(path))?;
    Ok(format!("file-object-store://{}", absolute.display()))
}

/// Wraps the tables' object store (see [`crate::table`]).
#[derive(Debug)]
pub(crate) struct FaultWrapper;

impl WrappingObjectStore for FaultWrapper {
    fn wrap(&self, _prefix: &str, inner: Arc<dyn ObjectStore>) -> Arc<dyn ObjectStore> {
        Arc::new(FaultStore { inner })
    }

    fn wrap_paginated(
        &self,
        _prefix: &str,
        original: Arc<dyn PaginatedListStore>,
    ) -> Option<Arc<dyn PaginatedListStore>> {
        Some(original)
    }
}

#[derive(Debug)]
struct FaultStore {
    inner: Arc<dyn ObjectStore>,
}

impl fmt::Display for FaultStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultStore({})", self.inner)
    }
}

/// The local file an object location names (local stores address files by
/// their absolute path without the leading `/`).
fn file(location: &Path) -> PathBuf {
    PathBuf::from(format!("/{location}"))
}

fn check(location: &Path, op: FileOp) -> Result<()> {
    match decide(&file(location), op) {
        None => Ok(()),
        Some(fault) => Err(object_store::Error::Generic {
            store: "fault layer",
            source: Box::new(fault.error()),
        }),
    }
}

#[async_trait]
impl ObjectStore for FaultStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        options: PutOptions,
    ) -> Result<PutResult> {
        check(location, FileOp::Write)?;
        self.inner.put_opts(location, payload, options).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        options: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        check(location, FileOp::Create)?;
        let inner = self.inner.put_multipart_opts(location, options).await?;
        Ok(Box::new(FaultUpload {
            location: location.clone(),
            inner,
        }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let checked = locations
            .map(|location| {
                let location = location?;
                check(&location, FileOp::Remove)?;
                Ok(location)
            })
            .boxed();
        self.inner.delete_stream(checked)
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        check(to, FileOp::Rename)?;
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        check(to, FileOp::Rename)?;
        self.inner.rename_opts(from, to, options).await
    }
}

#[derive(Debug)]
struct FaultUpload {
    location: Path,
    inner: Box<dyn MultipartUpload>,
}

#[async_trait]
impl MultipartUpload for FaultUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> Result<PutResult> {
        if let Err(e) = check(&self.location, FileOp::Write) {
            let _ = self.inner.abort().await;
            return Err(e);
        }
        self.inner.complete().await
    }

    async fn abort(&mut self) -> Result<()> {
        self.inner.abort().await
    }
}
