//! The keyword options of the codec's calls (`loads(data, zero_copy=True)`), parsed in one step
//! shared by every codec method: the table of which method takes which option is here, once,
//! and so is the error for a name no method takes (an `OptionError` with the closest option,
//! where PyO3's own parsing would raise a bare `TypeError` naming no public function).
//!
//! The methods take their arguments as CPython's vectorcall hands them (`METH_FASTCALL |
//! METH_KEYWORDS`): positional arguments, then the keywords' values, with their names in a
//! tuple. A call without keywords costs one null check; a keyword's name is compared by
//! pointer against the interned option names first (names written in Python source are
//! interned), by value only when that fails (`**options` built at run time).

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyString, PyTuple};
use pyo3::{Borrowed, PyTypeInfo};

use crate::errors::OptionError;

/// Every keyword option of the codec's calls (python/freight/_options.py declares them for the
/// Python side; tools/check_options.py checks the two against each other through the methods'
/// signatures, which `text_signature` writes from this table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opt {
    AllowPickle,
    ZeroCopy,
    Verify,
    Checksum,
    Compression,
    Key,
    MaxSize,
    AllowedTags,
    StrictVersions,
    Copy,
}

const COUNT: usize = 10;
const ALL: [Opt; COUNT] = [
    Opt::AllowPickle,
    Opt::ZeroCopy,
    Opt::Verify,
    Opt::Checksum,
    Opt::Compression,
    Opt::Key,
    Opt::MaxSize,
    Opt::AllowedTags,
    Opt::StrictVersions,
    Opt::Copy,
];

impl Opt {
    pub const fn name(self) -> &'static str {
        match self {
            Opt::AllowPickle => "allow_pickle",
            Opt::ZeroCopy => "zero_copy",
            Opt::Verify => "verify",
            Opt::Checksum => "checksum",
            Opt::Compression => "compression",
            Opt::Key => "key",
            Opt::MaxSize => "max_size",
            Opt::AllowedTags => "allowed_tags",
            Opt::StrictVersions => "strict_versions",
            Opt::Copy => "copy",
        }
    }

    const fn bit(self) -> u16 {
        1 << self as u16
    }
}

/// What `dumps`, `dumps_frames` and `_dumps_parts` take.
pub const DUMPS: &[Opt] = &[Opt::Checksum, Opt::Compression, Opt::Key];
/// What `loads` and `loads_frames` take.
pub const LOADS: &[Opt] = &[
    Opt::AllowPickle,
    Opt::ZeroCopy,
    Opt::Verify,
    Opt::Key,
    Opt::MaxSize,
    Opt::AllowedTags,
    Opt::StrictVersions,
    Opt::Copy, // last: LOADS_NODE leaves it out
];
/// What `_loads_node` takes: `loads`' options but `copy` (a lazy read's node is decoded into new
/// objects or views as its `LazyValue` says, not per call).
pub const LOADS_NODE: &[Opt] = match LOADS.split_last() {
    Some((Opt::Copy, rest)) => rest,
    _ => panic!("LOADS ends with copy"),
};

/// One codec method's arguments: its positional-only parameters, then its keyword options.
pub struct Signature {
    pub name: &'static str,
    pub positional: &'static [&'static str],
    pub options: &'static [Opt],
}

impl Signature {
    /// The `__text_signature__` line CPython reads from a method's docstring (what
    /// `inspect.signature` and `help()` show): `loads($self, data, /, *, allow_pickle=None, ...)`.
    pub fn text_signature(&self) -> String {
        let mut out = format!("{}($self", self.name);
        for name in self.positional {
            out.push_str(", ");
            out.push_str(name);
        }
        out.push_str(", /, *");
        for opt in self.options {
            out.push_str(", ");
            out.push_str(opt.name());
            out.push_str("=None");
        }
        out.push(')');
        out
    }
}

/// A call's keyword options: each the object passed, or None when left out or passed as None.
/// The objects are the caller's (borrowed for the call's duration).
pub struct CallOptions<'a, 'py> {
    values: [Option<Borrowed<'a, 'py, PyAny>>; COUNT],
    given: u16,
}

impl<'a, 'py> CallOptions<'a, 'py> {
    pub fn get(&self, opt: Opt) -> Option<&Bound<'py, PyAny>> {
        self.values[opt as usize].as_deref()
    }

    /// Whether the call passed no option but, at most, those of `except`.
    pub fn none_but(&self, except: &[Opt]) -> bool {
        let allowed = except.iter().fold(0, |bits, opt| bits | opt.bit());
        self.given & !allowed == 0
    }
}

/// The interned names, in `ALL`'s order, which keywords written in Python source are.
static NAMES: PyOnceLock<[Py<PyString>; COUNT]> = PyOnceLock::new();

fn interned(py: Python<'_>) -> &[Py<PyString>; COUNT] {
    NAMES.get_or_init(py, || {
        ALL.map(|opt| PyString::intern(py, opt.name()).unbind())
    })
}

/// The option `name` is, if any: by pointer, then by value.
fn lookup(py: Python<'_>, name: Borrowed<'_, '_, PyAny>) -> Option<Opt> {
    let names = interned(py);
    if let Some(i) = names.iter().position(|n| n.as_ptr() == name.as_ptr()) {
        return Some(ALL[i]);
    }
    let name = name.cast::<PyString>().ok()?;
    let text = name.to_str().ok()?;
    ALL.into_iter().find(|opt| opt.name() == text)
}

/// A call's arguments as CPython hands them to a `METH_FASTCALL | METH_KEYWORDS` method: `nargs`
/// positional arguments at `args`, then one value per name of the `kwnames` tuple (or null),
/// and `slf`, the object the method was called on; all the caller's, alive for the call.
pub struct RawCall {
    pub slf: *mut ffi::PyObject,
    pub args: *const *mut ffi::PyObject,
    pub nargs: ffi::Py_ssize_t,
    pub kwnames: *mut ffi::PyObject,
}

/// Splits a call's arguments into the method's positional ones and its options; a wrong
/// number of positional arguments is Python's `TypeError`, a keyword the method does not take
/// an `OptionError` naming the public function (see `unexpected`).
///
/// # Safety
/// `call` as CPython passed it (see `RawCall`).
pub unsafe fn parse<'a, 'py>(
    py: Python<'py>,
    signature: &Signature,
    call: RawCall,
) -> PyResult<(Positional<'a, 'py>, CallOptions<'a, 'py>)> {
    let RawCall {
        slf,
        args,
        nargs,
        kwnames,
    } = call;
    let wanted = signature.positional.len();
    if nargs as usize != wanted {
        return Err(positional_error(signature, nargs as usize));
    }
    let mut options = CallOptions {
        values: [None; COUNT],
        given: 0,
    };
    // SAFETY: CPython passes `nargs` positional arguments at `args` (the caller's, alive
    // for the call).
    let positional = Positional {
        py,
        args: unsafe { std::slice::from_raw_parts(args, wanted) },
    };
    if kwnames.is_null() {
        return Ok((positional, options));
    }
    // SAFETY: a non-null kwnames is a tuple of str, alive for the call.
    let names = unsafe { Borrowed::from_ptr(py, kwnames).cast_unchecked::<PyTuple>() };
    for (i, name) in names.iter_borrowed().enumerate() {
        match lookup(py, name) {
            Some(opt) if signature.options.contains(&opt) => {
                // SAFETY: the keywords' values follow the positional arguments, one per name.
                let value = unsafe { Borrowed::from_ptr(py, *args.add(wanted + i)) };
                // `key=None` is the option left out (the codec's setting), as the signature's
                // `=None` says.
                if !value.is_none() {
                    options.values[opt as usize] = Some(value);
                    options.given |= opt.bit();
                }
            }
            _ => return Err(unexpected(py, signature, slf, name)),
        }
    }
    Ok((positional, options))
}

/// A call's positional arguments, as many as its signature has (`parse` checked).
pub struct Positional<'a, 'py> {
    py: Python<'py>,
    args: &'a [*mut ffi::PyObject],
}

impl<'a, 'py> Positional<'a, 'py> {
    pub fn get(&self, index: usize) -> Borrowed<'a, 'py, PyAny> {
        // SAFETY: the caller's references, alive for the call (`parse`'s contract).
        unsafe { Borrowed::from_ptr(self.py, self.args[index]) }
    }
}

/// Python's own words for a wrong number of positional arguments.
fn positional_error(signature: &Signature, given: usize) -> PyErr {
    let wanted = signature.positional.len();
    let name = signature.name;
    if given < wanted {
        let missing = &signature.positional[given..];
        let plural = if missing.len() == 1 { "" } else { "s" };
        let names = missing
            .iter()
            .map(|n| format!("'{n}'"))
            .collect::<Vec<_>>()
            .join(" and ");
        pyo3::exceptions::PyTypeError::new_err(format!(
            "{name}() missing {} required positional argument{plural}: {names}",
            missing.len()
        ))
    } else {
        let plural = if wanted == 1 { "" } else { "s" };
        pyo3::exceptions::PyTypeError::new_err(format!(
            "{name}() takes {wanted} positional argument{plural} but {given} were given"
        ))
    }
}

/// `OptionError.unexpected` (python/freight/exceptions.py: the "did you mean" message every
/// freight function gives) for a keyword `signature` does not take. The public function is
/// `freight.loads` for the module-level codec, which pickles by reference (its `__reduce__`
/// gives its global name, a str), else `Freight.loads` (the class's name).
fn unexpected(
    py: Python<'_>,
    signature: &Signature,
    slf: *mut ffi::PyObject,
    name: Borrowed<'_, '_, PyAny>,
) -> PyErr {
    // SAFETY: the object the method was called on, alive for the call.
    let codec = unsafe { Borrowed::from_ptr(py, slf) };
    let module_level = codec
        .call_method0("__reduce__")
        .is_ok_and(|reduced| reduced.is_instance_of::<PyString>());
    let owner = if module_level {
        "freight".to_owned()
    } else {
        codec
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "Codec".to_owned())
    };
    let public = format!("{owner}.{}", signature.name);
    let known: Vec<&str> = signature.options.iter().map(|opt| opt.name()).collect();
    match OptionError::type_object(py).call_method1("unexpected", (public, name, known)) {
        Ok(error) => PyErr::from_value(error),
        Err(err) => err,
    }
}
