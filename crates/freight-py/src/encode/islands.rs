//! Pickle islands: an object the walker has no native encoding for (a function, a dataclass, an
//! object-dtype array) is pickled where the walker meets it, and the walk goes on. One
//! cloudpickle pickler serves every island of a payload, so its memo spans them all: the same
//! function twice is one function, functions share their globals, a dynamic class stays one
//! class. Each island is a Pickle node of flavour 2 (FORMAT.md), whose stream the decoder's one
//! unpickler loads in tree order. Arrays and registered types inside an island become externals
//! through the sink, as in the whole-payload pickler (pickle_sink.rs).
//!
//! What one island pickles by value and the native tree also holds would come back as two
//! objects; the walker memoizes every object that could be in both places (its reference count
//! says something else holds it), so `Walker::islands_alias` finds any such object at the end of
//! the walk, and the payload then goes to one pickler as a whole (`encode_pickled`), as before.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use pyo3::{ffi, intern};

use crate::encode::dispatch::DispatchRefs;
use crate::encode::pickle_sink::PickleSink;
use crate::encode::state::FrameSource;
use crate::encode::walker::{Walker, FRAME_MIN};
use crate::errors::{Error, Result};
use freight_core::ptrmap::PtrMap;
use freight_core::PickleData;

/// Islands one payload may have. Each costs a pickler `dump` and, on loading, an unpickler
/// `load` over its own stream (about 1.5 us each way, and its node): a payload of many objects
/// without a native encoding (1000 fractions or dataclasses) is pickled faster, and smaller, by
/// one pickler as a whole (measured: 1000 fractions, islands 1.7 ms dumps and 2.5 ms loads, the
/// whole payload 0.5 and 0.47 ms). Past this many, it goes to that pickler (deterministic: the
/// count depends on the value alone).
const MAX_ISLANDS: usize = 16;

/// The payload's island pickler and what its islands handed to freight.
pub struct IslandSession {
    sink: Py<PickleSink>,
    pickler: Py<PyAny>,
    /// cloudpickle's pickler (plain pickle's when cloudpickle is not installed).
    cloud: bool,
    /// The C pickler's `dump` (see `_pickle.session_pickler`).
    dump: Py<PyAny>,
    /// Objects inside the islands' externals (a registered object's metadata), which are walked
    /// natively, one memo scope per island: one of them found again elsewhere is an alias the
    /// format cannot express across scopes.
    external_keys: PtrMap<()>,
    aliased: bool,
    /// Islands written so far (see MAX_ISLANDS).
    count: usize,
    /// Whether the pickler may serve the thread's next payload (`_pickle.keep_idle_session`):
    /// not when it asks `persistent_id` for every object (a serializer registered for a
    /// built-in type), which depends on the registry as it is now.
    reusable: bool,
}

impl IslandSession {
    fn start(py: Python<'_>, dispatch: &DispatchRefs) -> Result<Self> {
        let bridge = crate::python_types::pickle_bridge(py)?;
        // The thread's pickler of its last payload: building one (cloudpickle's pickler, its
        // hook, their teardown) costs about 24k instructions, a tenth of pickling a lambda.
        let idle = bridge.getattr(intern!(py, "take_idle_session"))?.call0()?;
        if !idle.is_none() {
            let (sink, pickler, cloud, dump): (Bound<'_, PickleSink>, Py<PyAny>, bool, Py<PyAny>) =
                idle.extract()?;
            let serves = sink.borrow().serves(py, dispatch)?;
            let session = Self::new(sink.unbind(), pickler, cloud, dump, true);
            if serves {
                return Ok(session);
            }
            session.close(py); // kept again, for the registry it serves
        }
        let sink = PickleSink::new(dispatch.clone_ref(py), PtrMap::default(), true);
        let reusable = !sink.needs_persistent_id(py)?;
        let sink = Py::new(py, sink)?;
        let (pickler, cloud, dump): (Py<PyAny>, bool, Py<PyAny>) = bridge
            .getattr(intern!(py, "session_pickler"))?
            .call1((sink.bind(py),))?
            .extract()?;
        Ok(Self::new(sink, pickler, cloud, dump, reusable))
    }

    fn new(
        sink: Py<PickleSink>,
        pickler: Py<PyAny>,
        cloud: bool,
        dump: Py<PyAny>,
        reusable: bool,
    ) -> Self {
        Self {
            sink,
            pickler,
            cloud,
            dump,
            external_keys: PtrMap::default(),
            aliased: false,
            count: 0,
            reusable,
        }
    }

    /// The payload is done: the pickler becomes the thread's idle one (its memo cleared), or,
    /// when it cannot serve another payload, its reference cycle is broken (its hook holds one
    /// of its bound methods).
    pub fn close(self, py: Python<'_>) {
        if self.reusable {
            let kept = crate::python_types::pickle_bridge(py).and_then(|bridge| {
                bridge.getattr(intern!(py, "keep_idle_session"))?.call1((
                    &self.sink,
                    &self.pickler,
                    self.cloud,
                    &self.dump,
                ))
            });
            if kept.is_ok() {
                return;
            }
        }
        if let Ok(hook) = self
            .pickler
            .bind(py)
            .getattr(intern!(py, "reducer_override"))
        {
            let _ = hook.call_method0(intern!(py, "close"));
        }
    }
}

impl<'py> Walker<'_, 'py> {
    /// `obj` has no native encoding: pickled here, by the payload's island pickler.
    pub(crate) fn island_here(&mut self, obj: &Bound<'py, PyAny>) -> Result<()> {
        let py = self.py;
        let Some(dispatch) = self.islands else {
            return Err(Error::Unsupported);
        };
        let mut session = match self.state.session.take() {
            Some(session) => session,
            None => IslandSession::start(py, dispatch)?,
        };
        session.count += 1;
        if session.count > MAX_ISLANDS {
            self.state.session = Some(session);
            return Err(Error::Unsupported);
        }
        // The sink adds frames, tags and flags to the payload's state while pickle runs.
        let state = std::mem::take(&mut *self.state);
        let sink = session.sink.bind(py).borrow();
        sink.begin_island(state, obj);
        let dumped = session.dump.bind(py).call1((session.pickler.bind(py), obj));
        let island = sink.end_island();
        drop(sink);
        *self.state = island.state;
        let failed = dumped.is_err();
        self.state.session = Some(session);
        if failed {
            // Whatever failed (an open file, an object's own __reduce__, deep recursion), the
            // whole-payload pickler says it as it always has, with the path to the object.
            return Err(Error::Unsupported);
        }
        let session = self.state.session.as_mut().expect("just put back");
        self.state.cloudpickle |= session.cloud;
        for key in island.external_keys {
            session.aliased |= session.external_keys.insert(key, ()).is_some();
        }
        self.state.needs_pickle = true;
        self.state.pickled = true;
        let data = match island.chunks.as_slice() {
            [one] => one.bind(py).clone(),
            chunks => {
                let mut all = Vec::new();
                for chunk in chunks {
                    all.extend_from_slice(chunk.bind(py).as_bytes());
                }
                PyBytes::new(py, &all)
            }
        };
        let bytes = data.as_bytes();
        let data = if bytes.len() >= FRAME_MIN {
            let (ptr, len) = (bytes.as_ptr() as usize, bytes.len());
            PickleData::Frame(self.state.add_frame(FrameSource::Object {
                obj: data.clone().into_any().unbind(),
                ptr,
                len,
            })?)
        } else {
            PickleData::Inline(bytes)
        };
        if self.depth == 0 && self.w.is_empty() {
            // The payload is this one island (a function, say): a pickle like any other, loaded
            // without the session an unpickler of several islands needs.
            let cloud = self.state.cloudpickle;
            self.w
                .pickle(cloud, data, &island.buffers, &island.externals);
        } else {
            self.w
                .pickle_session(data, &island.buffers, &island.externals);
        }
        Ok(())
    }

    /// At the end of a walk with islands: whether an object is both in an island's pickle (or
    /// its externals) and elsewhere (the native tree, another island's externals). Such a
    /// payload goes to one pickler as a whole, which keeps the alias. Also closes the session.
    pub fn islands_alias(&mut self) -> Result<bool> {
        let py = self.py;
        let Some(session) = self.state.session.take() else {
            return Ok(false);
        };
        let mut aliased = session.aliased;
        if !aliased {
            aliased = session.external_keys.keys().any(|key| self.memo_has(*key));
        }
        if !(aliased || self.memo_is_empty() && session.external_keys.is_empty()) {
            let memo = session
                .pickler
                .bind(py)
                .getattr(intern!(py, "memo"))?
                .call_method0(intern!(py, "copy"))?;
            let memo = memo.cast_into::<PyDict>().map_err(PyErr::from)?;
            for (key, entry) in memo.iter() {
                let key: usize = key.extract()?;
                if !self.memo_has(key) && !session.external_keys.contains_key(&key) {
                    continue;
                }
                // Equal strings and bytes may be one object or two: nothing depends on it.
                let obj = entry.get_item(1)?;
                // SAFETY: reading the type of a live object.
                let ty = unsafe { ffi::Py_TYPE(obj.as_ptr()) };
                if ty != &raw mut ffi::PyUnicode_Type && ty != &raw mut ffi::PyBytes_Type {
                    aliased = true;
                    break;
                }
            }
        }
        session.close(py);
        Ok(aliased)
    }
}
