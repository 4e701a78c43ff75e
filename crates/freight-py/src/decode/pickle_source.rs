//! The decode half of the pickle bridge (the Python half is python/freight/_pickle.py): Pickle
//! nodes run pickle over their stream and out-of-band buffers, and `PickleSource` is the
//! unpickler's `persistent_load`, which decodes the externals (arrays and registered types
//! that the encoder took out of the pickle stream) once each, so identity holds.

use std::cell::RefCell;
use std::rc::Rc;

use freight_core::{PickleDataRef, Reader};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyByteArray, PyBytes, PyList};

use crate::decode::input::DecodeCtx;
use crate::decode::tree::{Memo, TreeDecoder};
use crate::errors::{Error, Result};

impl<'py> TreeDecoder<'_, 'py> {
    /// A Pickle node (after its tag).
    pub(crate) fn pickle(&mut self, r: &mut Reader<'_>) -> Result<Bound<'py, PyAny>> {
        let py = self.py;
        let ctx = self.ctx()?.clone();
        if !ctx.opts.allow_pickle {
            return Err(Error::Unsafe(
                "the payload holds a pickle node, and allow_pickle=False refuses to run pickle; load it with \
                 allow_pickle=True only if you trust its source"
                    .to_owned(),
            ));
        }
        let node = r.pickle()?;
        let data = match node.data {
            PickleDataRef::Inline(bytes) => PyBytes::new(py, bytes).into_any(),
            PickleDataRef::Frame(index) => ctx.frame_view(py, index, false)?,
        };
        if node.buffers.is_empty() && node.externals.is_empty() && !node.session {
            // A pickle and nothing else (a function on its own): pickle.loads, with no Python
            // wrapper between (about 2k instructions of a lambda's 90k).
            return plain_loads(py, &data, &ctx);
        }
        let buffers = PyList::empty(py);
        for index in &node.buffers {
            let view = ctx.frame_view(py, *index, true)?;
            let writable_wanted = !ctx.opts.zero_copy;
            let readonly: bool = view.getattr(pyo3::intern!(py, "readonly"))?.extract()?;
            if writable_wanted && readonly {
                // Out-of-band buffers become the memory of the objects pickle rebuilds (arrays of
                // ndarray subclasses, ...): give them writable memory, as pickle would.
                buffers.append(PyByteArray::from(&view)?)?;
            } else {
                buffers.append(view)?;
            }
        }
        let base = ctx.tree().as_ptr() as usize;
        let externals: Vec<(usize, usize)> = node
            .externals
            .iter()
            .map(|ext| (ext.as_ptr() as usize - base, ext.len()))
            .collect();
        let bridge = crate::python_types::pickle_bridge(py)?;
        let load = if node.session {
            // A pickle island: its stream continues the payload's one pickler, so the payload's
            // one unpickler loads it (islands come in tree order, as they were pickled).
            let session = match &self.pickle_session {
                Some(session) => session.clone(),
                None => {
                    let session = bridge.getattr(pyo3::intern!(py, "LoadSession"))?.call0()?;
                    self.pickle_session = Some(session.clone());
                    session
                }
            };
            session.getattr(pyo3::intern!(py, "load"))?
        } else {
            bridge.getattr(pyo3::intern!(py, "load"))?
        };
        let producer = ctx.producer();
        if externals.is_empty() {
            // Nothing to hand back to freight: plain pickle.loads, no source to set up.
            return Ok(load.call1((data, buffers, py.None(), producer.as_deref()))?);
        }
        let source = Bound::new(py, PickleSource::new(ctx.clone(), externals))?;
        let out = load.call1((data, buffers, &source, producer.as_deref()));
        source.borrow().close();
        Ok(out?)
    }
}

static PICKLE_LOADS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `pickle.loads(data)`, its errors said as `_pickle.load` says them. Unlike `_pickle.load`, it
/// puts no source on the stack `_pickle._external` reads: a stream without externals that calls
/// it anyway (a forged one) meets the enclosing load's source, or the error that there is none.
fn plain_loads<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    ctx: &Rc<DecodeCtx>,
) -> Result<Bound<'py, PyAny>> {
    let loads = PICKLE_LOADS.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
        Ok(py.import("pickle")?.getattr("loads")?.unbind())
    })?;
    match loads.bind(py).call1((data,)) {
        Ok(obj) => Ok(obj),
        Err(err) => {
            let producer = ctx.producer();
            let error = crate::python_types::pickle_bridge(py)?
                .getattr(pyo3::intern!(py, "load_failed"))?
                .call1((err.into_value(py), producer.as_deref()))?;
            Err(PyErr::from_value(error).into())
        }
    }
}

#[pyclass(module = "freight._freight", unsendable)]
pub struct PickleSource {
    ctx: RefCell<Option<Rc<DecodeCtx>>>,
    /// Where each external's subtree lies in the payload's tree: (offset, length).
    externals: Vec<(usize, usize)>,
    cache: RefCell<Vec<Option<Py<PyAny>>>>,
    /// One memo scope for all externals, as the encoder wrote them.
    memo: RefCell<Memo>,
}

impl PickleSource {
    fn new(ctx: Rc<DecodeCtx>, externals: Vec<(usize, usize)>) -> Self {
        let n = externals.len();
        Self {
            ctx: RefCell::new(Some(ctx)),
            externals,
            cache: RefCell::new((0..n).map(|_| None).collect()),
            memo: RefCell::new(Memo::new()),
        }
    }

    /// Ends the source's life: a reference kept by user code can no longer decode.
    fn close(&self) {
        self.ctx.borrow_mut().take();
    }

    fn load(&self, py: Python<'_>, pid: &Bound<'_, PyAny>) -> Result<Py<PyAny>> {
        let index: usize = pid
            .extract()
            .map_err(|_| Error::corrupt(format!("pickle asked for external {pid}")))?;
        let (offset, len) = *self.externals.get(index).ok_or_else(|| {
            Error::corrupt(format!(
                "pickle asked for external {index} but the payload has {}",
                self.externals.len()
            ))
        })?;
        if let Some(obj) = &self.cache.borrow()[index] {
            return Ok(obj.clone_ref(py));
        }
        let ctx = self.ctx.borrow().clone().ok_or_else(|| {
            Error::decode(
                "this pickle source is closed: its payload was decoded already".to_owned(),
            )
        })?;
        let data = ctx
            .tree()
            .get(offset..offset + len)
            .ok_or_else(|| Error::corrupt("a pickle external lies outside the tree"))?;
        // Continue the externals' shared memo, and keep it for the next one whatever happens.
        let memo = std::mem::take(&mut *self.memo.borrow_mut());
        let mut decoder = TreeDecoder::with_memo(py, &ctx, memo);
        let obj = decoder.root(data);
        *self.memo.borrow_mut() = decoder.into_memo();
        let obj = obj?.unbind();
        self.cache.borrow_mut()[index] = Some(obj.clone_ref(py));
        Ok(obj)
    }
}

#[pymethods]
impl PickleSource {
    fn persistent_load(&self, py: Python<'_>, pid: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        Ok(self.load(py, pid)?)
    }
}
