use std::{
    collections::hash_map::DefaultHasher,
    fmt::Write,
    hash::{Hash, Hasher},
    mem, slice, vec,
};

use ahash::AHashSet;
use hashbrown::HashTable;
use serde::ser::SerializeStruct;
use smallvec::{SmallVec, smallvec};

use super::{DictItemsView, DictKeysView, DictValuesView, LazyHeapSet, PyTrait, allocate_tuple, list::repr_check_time};
use crate::{
    args::{ArgValues, FromArgs, KwargsValues},
    bytecode::{CallResult, ContainsVM, RecursionToken, VM},
    defer_drop, defer_drop_mut,
    exception_private::{ExcType, ExcTypeExt, RunResult},
    expressions::CmpOperator,
    heap::{
        ContainsHeap, DropGuard, DropWithContext, Heap, HeapData, HeapId, HeapItem, HeapObjectRead, HeapRead,
        HeapReadOutput,
    },
    identity::Identity,
    intern::{Interns, StaticStrings},
    modules::collections::{
        counter::{
            CounterCmp, CounterOp, counter_binary_op, counter_compare, counter_elements, counter_inplace_op,
            counter_most_common, counter_order, counter_total, counter_unary_op, counter_update_method,
        },
        defaultdict::defaultdict_missing,
    },
    types::Type,
    value::{EitherStr, VALUE_SIZE, Value, eq_bigint, eq_bytes, eq_f64, eq_i64, eq_str},
};

/// Python dict type preserving insertion order.
///
/// This type provides Python dict semantics including dynamic key-value namespaces,
/// reference counting for heap values, and standard dict methods.
///
/// # Implemented Methods
/// - `get(key[, default])` - Get value or default
/// - `keys()` - Return view of keys
/// - `values()` - Return view of values
/// - `items()` - Return view of (key, value) pairs
/// - `pop(key[, default])` - Remove and return value
/// - `clear()` - Remove all items
/// - `copy()` - Shallow copy
/// - `update(other)` - Update from dict or iterable of pairs
/// - `setdefault(key[, default])` - Get or set default value
/// - `popitem()` - Remove and return last (key, value) pair
/// - `fromkeys(iterable[, value])` - Create dict from keys (classmethod)
///
/// All dict methods from Python's builtins are implemented.
///
/// # Storage Strategy
/// Uses a `HashTable<usize>` for hash lookups combined with a dense `Vec<DictEntry>`
/// to preserve insertion order (matching Python 3.7+ behavior). The hash table maps
/// key hashes to indices in the entries vector. This design provides O(1) lookups
/// while maintaining insertion order for iteration.
///
/// # Reference Counting
/// When values are added via `set()`, their reference counts are incremented.
/// When using `from_pairs()`, ownership is transferred without incrementing refcounts
/// (caller must ensure values' refcounts account for the dict's reference).
///
/// # GC Optimization
/// The `contains_refs` flag tracks whether the dict contains any `Value::Ref` items.
/// This allows `collect_child_ids` and `py_dec_ref_ids` to skip iteration when the
/// dict contains only primitive values (ints, bools, None, etc.), significantly
/// improving GC performance for dicts of primitives.
#[derive(Debug, Default)]
pub(crate) struct Dict {
    /// indices mapping from the entry hash to its index.
    indices: HashTable<usize>,
    /// entries is a dense vec maintaining entry order.
    entries: Vec<DictEntry>,
    /// True if any key or value in the dict is a `Value::Ref`. Used to skip iteration
    /// in `collect_child_ids` and `py_dec_ref_ids` when no refs are present.
    /// Only transitions from false to true (never back) since tracking removals would be O(n).
    contains_refs: bool,
    /// Whether this is a plain `dict` or a `collections.defaultdict` (and its
    /// factory). A defaultdict reuses all of `Dict`'s behaviour and only
    /// diverges on missing-key access, `type`/`repr`, and the
    /// `default_factory` attribute.
    kind: DictKind,
}

/// Distinguishes a plain `dict` from a `collections.defaultdict` or `Counter`.
///
/// Stored as one word: a plain `dict` (the overwhelmingly common case) is
/// `None`, and the special kinds box a [`DictSpecial`]. `Dict` is embedded
/// inline in `Instance` and `Module`, so every byte here is paid by the
/// `HeapData` size ceiling (see the assertion in `heap_data.rs`) — an unboxed
/// factory `Value` would push the whole heap arena's entry size up.
///
/// The real solution is inheritance, as CPython does it: both are genuine
/// `dict` subclasses there (`class Counter(dict)`; `defaultdict`'s C struct
/// embeds a `PyDictObject` and adds a `default_factory`), so they get the dict
/// surface *and* their own type identity. Monty has no inheritance and derives
/// type from the `HeapData` variant, so kinds approximate the reuse half only —
/// hence the `type(x) is Counter` divergence in `limitations/collections.md`.
/// Workable in the meantime; revisit once inheritance exists.
///
/// The defaultdict factory is a heap reference the dict owns — released in
/// [`Dict::py_dec_ref_ids`] / `DropWithContext` and reported to the cycle
/// collector alongside the entries, so those two paths MUST stay in sync.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct DictKind(Option<Box<DictSpecial>>);

/// Boxed state for the non-plain [`DictKind`]s. Private to this module —
/// everything outside speaks through `DictKind`'s constructors and `Dict`'s
/// accessors (`is_defaultdict`, `default_factory`, `kind_type`, ...).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
enum DictSpecial {
    /// A `collections.defaultdict`; the optional `default_factory` is invoked
    /// on a missing-key access. `None` means missing keys raise `KeyError`.
    Default(Option<Value>),
    /// A `collections.Counter`; a missing-key access returns `0` (without
    /// inserting), and it adds `most_common`/`elements`/arithmetic on top of
    /// the dict surface.
    Counter,
}

impl DictKind {
    /// A plain `dict` — no allocation.
    #[must_use]
    pub fn plain() -> Self {
        Self(None)
    }

    /// A `defaultdict` kind, taking ownership of the factory reference.
    #[must_use]
    pub fn defaultdict(factory: Option<Value>) -> Self {
        Self(Some(Box::new(DictSpecial::Default(factory))))
    }

    /// A `Counter` kind.
    #[must_use]
    pub fn counter() -> Self {
        Self(Some(Box::new(DictSpecial::Counter)))
    }
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct DictEntry {
    key: Value,
    value: Value,
    /// the hash is needed here for correct use of insert_unique
    hash: u64,
}

impl Dict {
    /// Creates a new empty dict.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            indices: HashTable::with_capacity(capacity),
            entries: Vec::with_capacity(capacity),
            contains_refs: false,
            kind: DictKind::plain(),
        }
    }

    /// Marks this dict as a `defaultdict` with the given factory (a callable or
    /// `None`), taking ownership of the factory reference. Called once at
    /// construction; the factory joins the dict's `contains_refs` accounting.
    pub fn make_defaultdict(&mut self, factory: Option<Value>) {
        if matches!(factory, Some(Value::Ref(_))) {
            self.contains_refs = true;
        }
        self.kind = DictKind::defaultdict(factory);
    }

    /// Returns whether this dict is a `defaultdict`.
    #[must_use]
    pub fn is_defaultdict(&self) -> bool {
        matches!(self.kind.0.as_deref(), Some(DictSpecial::Default(_)))
    }

    /// Marks this dict as a `collections.Counter`.
    pub fn make_counter(&mut self) {
        self.kind = DictKind::counter();
    }

    /// Returns whether this dict is a `Counter`.
    #[must_use]
    pub fn is_counter(&self) -> bool {
        matches!(self.kind.0.as_deref(), Some(DictSpecial::Counter))
    }

    /// Clones this dict's kind for a derived dict, taking a counted reference to
    /// a `defaultdict` factory.
    ///
    /// Exhaustive over [`DictKind`] on purpose: every operation that builds a
    /// *new* dict from an existing one (`copy`, and any future `|` / slice-like
    /// derivation) must carry the tag across, and a hand-written `if
    /// is_defaultdict()` chain silently degrades a `Counter` to a plain dict.
    #[must_use]
    pub fn cloned_kind(&self, heap: &impl ContainsHeap) -> DictKind {
        match self.kind.0.as_deref() {
            None => DictKind::plain(),
            Some(DictSpecial::Default(factory)) => {
                DictKind::defaultdict(factory.as_ref().map(|f| f.clone_with_heap(heap)))
            }
            Some(DictSpecial::Counter) => DictKind::counter(),
        }
    }

    /// Adopts a kind produced by [`cloned_kind`], taking ownership of any
    /// factory reference it carries.
    pub fn set_kind(&mut self, kind: DictKind) {
        if matches!(kind.0.as_deref(), Some(DictSpecial::Default(Some(Value::Ref(_))))) {
            self.contains_refs = true;
        }
        self.kind = kind;
    }

    /// Returns the Python type for this dict's kind (`dict`, `defaultdict`, or
    /// `Counter`).
    #[must_use]
    pub fn kind_type(&self) -> Type {
        match self.kind.0.as_deref() {
            None => Type::Dict,
            Some(DictSpecial::Default(_)) => Type::DefaultDict,
            Some(DictSpecial::Counter) => Type::Counter,
        }
    }

    /// Returns the `default_factory` callable, or `None` for a plain dict or a
    /// factory-less defaultdict.
    #[must_use]
    pub fn default_factory(&self) -> Option<&Value> {
        match self.kind.0.as_deref() {
            Some(DictSpecial::Default(factory)) => factory.as_ref(),
            None | Some(DictSpecial::Counter) => None,
        }
    }

    /// Replaces the `default_factory` (the `d.default_factory = ...` setter),
    /// returning the previous factory for the caller to drop. Only valid on a
    /// defaultdict.
    pub fn replace_default_factory(&mut self, factory: Option<Value>) -> Option<Value> {
        if matches!(factory, Some(Value::Ref(_))) {
            self.contains_refs = true;
        }
        // The `default_factory =` setter only calls this on an existing
        // defaultdict; the other arms are defensive.
        match self.kind.0.as_deref_mut() {
            Some(DictSpecial::Default(slot)) => mem::replace(slot, factory),
            None | Some(DictSpecial::Counter) => {
                self.kind = DictKind::defaultdict(factory);
                None
            }
        }
    }

    /// Returns whether this dict contains any heap references (`Value::Ref`).
    ///
    /// Used during allocation to determine if this container could create cycles,
    /// and in `collect_child_ids` and `py_dec_ref_ids` to skip iteration when no refs
    /// are present.
    ///
    /// Note: This flag only transitions from false to true (never back). When a ref is
    /// removed via `pop()`, we do NOT recompute the flag because that would be O(n).
    /// This is conservative - we may iterate unnecessarily if all refs were removed,
    /// but we'll never skip iteration when refs exist.
    #[inline]
    #[must_use]
    pub fn has_refs(&self) -> bool {
        self.contains_refs
    }

    /// Creates a dict from a vector of (key, value) pairs.
    ///
    /// Assumes the caller is transferring ownership of all keys and values in the pairs.
    /// Does NOT increment reference counts since ownership is being transferred.
    /// Returns Err if any key is unhashable (e.g., list, dict).
    pub fn from_pairs(pairs: Vec<(Value, Value)>, vm: &mut VM<'_>) -> RunResult<Self> {
        let pairs_iter = pairs.into_iter();
        defer_drop_mut!(pairs_iter, vm);
        let dict = Self::with_capacity(pairs_iter.len());
        let mut dict_guard = DropGuard::new(dict, vm);
        let (dict, vm) = dict_guard.as_parts_mut();
        for (key, value) in pairs_iter {
            if let Some(old_value) = dict.set(key, value, vm)? {
                old_value.drop_with(vm);
            }
        }
        Ok(dict_guard.into_inner())
    }

    /// Inserts a JSON object entry whose key is guaranteed to be a string.
    ///
    /// This specialized path avoids the generic `py_eq`/candidate-cloning lookup
    /// used by ordinary dict insertion. JSON object keys are always strings, so
    /// we can compare keys directly by their string contents while preserving the
    /// same duplicate-key semantics as CPython (`{"a": 1, "a": 2}` keeps the
    /// last value and retains the first insertion position).
    ///
    /// Ownership follows [`Dict::set`]: `key` and `value` transfer to the dict,
    /// and are released here if the insertion exceeds the memory limit.
    pub fn set_json_string_key(&mut self, key: Value, value: Value, vm: &mut VM<'_>) -> RunResult<Option<Value>> {
        debug_assert!(json_key_string_slice(&key, vm.heap, vm.interns).is_some());

        if matches!(key, Value::Ref(_)) || matches!(value, Value::Ref(_)) {
            self.contains_refs = true;
        }

        let hash = key
            .py_hash(vm)?
            .expect("json object keys are always hashable strings")
            .raw();
        let opt_index = self.find_json_string_key_index(hash, &key, vm.heap, vm.interns);

        let entry = DictEntry { key, value, hash };
        if let Some(index) = opt_index {
            let old_entry = mem::replace(&mut self.entries[index], entry);
            old_entry.key.drop_with(vm);
            Ok(Some(old_entry.value))
        } else {
            let index = self.entries.len();
            self.entries.push(entry);
            self.indices.insert_unique(hash, index, |&i| self.entries[i].hash);
            Ok(None)
        }
    }

    /// Finds the existing entry index for a JSON string key.
    ///
    /// The `hash` must match the Python string hash for `key`. Only string keys
    /// participate; any non-string entry is treated as non-equal.
    fn find_json_string_key_index(&self, hash: u64, key: &Value, heap: &Heap, interns: &Interns) -> Option<usize> {
        let key_str = json_key_string_slice(key, heap, interns).expect("json object keys are always string values");
        self.indices
            .find(hash, |&idx| {
                let entry = &self.entries[idx];
                entry.hash == hash && json_key_equals_str(&entry.key, key_str, heap, interns)
            })
            .copied()
    }
}

/// Returns the underlying string slice for a JSON object key value.
///
/// JSON object parsing only inserts string keys, but the helper remains
/// defensive and returns `None` for any non-string value.
fn json_key_string_slice<'a>(key: &'a Value, heap: &'a Heap, interns: &'a Interns) -> Option<&'a str> {
    match key {
        Value::InternString(id) => Some(interns.get_str(*id)),
        Value::Ref(id) => match heap.get(*id) {
            HeapData::Str(string) => Some(string.as_str()),
            _ => None,
        },
        _ => None,
    }
}

/// Returns whether `key` is a string equal to `expected`.
///
/// This bypasses Python's full equality machinery because JSON object keys are
/// always strings, so content comparison is sufficient and much cheaper.
fn json_key_equals_str(key: &Value, expected: &str, heap: &Heap, interns: &Interns) -> bool {
    match key {
        Value::InternString(id) => interns.get_str(*id) == expected,
        Value::Ref(id) => match heap.get(*id) {
            HeapData::Str(string) => string.as_str() == expected,
            _ => false,
        },
        _ => false,
    }
}

impl<'h> HeapRead<'h, Dict> {
    /// Element-wise equality against another dict (matching keys and values).
    ///
    /// Shared by `Dict::py_eq_impl` and `HostClass::py_eq_impl` (which compares
    /// the dataclasses' attribute dicts).
    pub(crate) fn eq_dict(&self, other: &Self, vm: &mut VM<'h>) -> RunResult<bool> {
        if self.get(vm.heap).len() != other.get(vm.heap).len() {
            return Ok(false);
        }
        let iter = self.iter(vm)?;
        defer_drop_mut!(iter, vm);
        while let Some((key, value)) = iter.next(vm)? {
            let Some(other_value) = other.dict_get(key, vm)? else {
                return Ok(false);
            };
            defer_drop!(other_value, vm);
            if !value.py_eq(other_value, vm)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Multiset equality between two Counters.
    ///
    /// CPython compares over the union of both key sets with a missing key
    /// reading as `0`, so a zero count is indistinguishable from an absent one
    /// (`Counter(a=1, b=0) == Counter(a=1)`).
    ///
    /// Applies ONLY between two Counters: against anything else
    /// `Counter.__eq__` returns `NotImplemented` and the comparison falls back
    /// to [`eq_dict`](Self::eq_dict), where a zero count *is* a real entry — so
    /// `Counter(a=1, b=0) == {'a': 1}` stays `False`.
    pub(crate) fn eq_counter(&self, other: &Self, vm: &mut VM<'h>) -> RunResult<bool> {
        // Every count in `self` must match the other side's, missing reading as 0.
        let iter = self.iter(vm)?;
        defer_drop_mut!(iter, vm);
        while let Some((key, value)) = iter.next(vm)? {
            let other_value = other.dict_get(key, vm)?;
            let eq = match &other_value {
                Some(other_value) => value.py_eq(other_value, vm),
                None => value.py_eq(&Value::Int(0), vm),
            };
            if let Some(other_value) = other_value {
                other_value.drop_with(vm);
            }
            if !eq? {
                return Ok(false);
            }
        }

        // Keys only in `other` were not visited above, and must themselves be 0.
        let other_iter = other.iter(vm)?;
        defer_drop_mut!(other_iter, vm);
        while let Some((key, value)) = other_iter.next(vm)? {
            match self.dict_get(key, vm)? {
                // Already compared in the first pass.
                Some(existing) => existing.drop_with(vm),
                None => {
                    if !value.py_eq(&Value::Int(0), vm)? {
                        return Ok(false);
                    }
                }
            }
        }
        Ok(true)
    }

    /// Gets a value from the dict by key.
    ///
    /// Returns Ok(Some(value)) if key exists, Ok(None) if key doesn't exist.
    /// Returns Err if key is unhashable.
    pub(crate) fn dict_get<'a>(&'a self, key: &Value, vm: &'a mut VM<'h>) -> RunResult<Option<Value>> {
        let (opt_index, _hash) = self.find_index_hash(key, vm)?;
        if let Some(index) = opt_index {
            Ok(Some(self.get(vm.heap).entries[index].value.clone_with_heap(vm.heap)))
        } else {
            Ok(None)
        }
    }
}

impl Dict {
    /// Gets a value from the dict by string key name (immutable lookup).
    ///
    /// This is an O(1) lookup that doesn't require mutable heap access.
    /// Only works for string keys - returns None if the key is not found.
    pub fn get_by_str(&self, key_str: &str, heap: &Heap, interns: &Interns) -> Option<&Value> {
        // Compute hash for the string key
        let mut hasher = DefaultHasher::new();
        key_str.hash(&mut hasher);
        let hash = hasher.finish();

        // Find entry with matching hash and key
        self.indices
            .find(hash, |&idx| {
                let entry_key = &self.entries[idx].key;
                match entry_key {
                    Value::InternString(id) => interns.get_str(*id) == key_str,
                    Value::Ref(id) => {
                        if let HeapData::Str(s) = heap.get(*id) {
                            s.as_str() == key_str
                        } else {
                            false
                        }
                    }
                    _ => false,
                }
            })
            .map(|&idx| &self.entries[idx].value)
    }

    /// Sets a key-value pair in the dict.
    ///
    /// The caller transfers ownership of `key` and `value` to the dict. Their refcounts
    /// are NOT incremented here - the caller is responsible for ensuring the refcounts
    /// were already incremented (e.g., via `clone_with_heap` or `evaluate_use`).
    ///
    /// If the key already exists, replaces the old value and returns it (caller now
    /// owns the old value and is responsible for its refcount).
    /// Returns Err if key is unhashable or the insertion exceeds the memory limit;
    /// either way `key` and `value` are released, so the caller must not drop them.
    pub fn set(&mut self, key: Value, value: Value, vm: &mut VM<'_>) -> RunResult<Option<Value>> {
        vm.heap.protect_mut(self).set(key, value, vm)
    }
}

impl<'h> HeapRead<'h, Dict> {
    /// Sets a key-value pair in the dict.
    ///
    /// The caller transfers ownership of `key` and `value` to the dict. Their refcounts
    /// are NOT incremented here - the caller is responsible for ensuring the refcounts
    /// were already incremented (e.g., via `clone_with_heap` or `evaluate_use`).
    ///
    /// If the key already exists, replaces the old value and returns it (caller now
    /// owns the old value and is responsible for its refcount).
    /// Returns Err if key is unhashable or the insertion exceeds the memory limit;
    /// either way `key` and `value` are released, so the caller must not drop them.
    pub fn set(&mut self, key: Value, value: Value, vm: &mut VM<'h>) -> RunResult<Option<Value>> {
        // Track if we're adding a reference for GC optimization
        if matches!(key, Value::Ref(_)) || matches!(value, Value::Ref(_)) {
            self.get_mut(vm.heap).contains_refs = true;
        }

        // Handle hash computation errors explicitly so we can drop key/value properly
        let (opt_index, hash) = match self.find_index_hash(&key, vm) {
            Ok(result) => result,
            Err(e) => {
                // Drop the key and value before returning the error
                key.drop_with(vm);
                value.drop_with(vm);
                return Err(e);
            }
        };

        let entry = DictEntry { key, value, hash };
        if let Some(index) = opt_index {
            // Key exists, replace in place to preserve insertion order
            let old_entry = mem::replace(&mut self.get_mut(vm.heap).entries[index], entry);

            // Decrement refcount for old key (we're discarding it)
            old_entry.key.drop_with(vm);
            // Transfer ownership of the old value to caller (no clone needed)
            Ok(Some(old_entry.value))
        } else {
            let this = self.get_mut(vm.heap);
            let index = this.entries.len();
            this.entries.push(entry);
            this.indices
                .insert_unique(hash, index, |index| this.entries[*index].hash);
            Ok(None)
        }
    }

    /// Removes and returns a key-value pair from the dict.
    ///
    /// Returns Ok(Some((key, value))) if key exists, Ok(None) if key doesn't exist.
    /// Returns Err if key is unhashable.
    ///
    /// Reference counting: does not decrement refcounts for removed key and value;
    /// caller assumes ownership and is responsible for managing their refcounts.
    pub fn pop(&mut self, key: &Value, vm: &mut VM<'h>) -> RunResult<Option<(Value, Value)>> {
        // Find the key using the candidate-based lookup
        let (opt_index, _hash) = self.find_index_hash(key, vm)?;

        if let Some(index) = opt_index {
            // Remove the entry
            let entry = self.get_mut(vm.heap).entries.remove(index);
            // Remove from index table and rebuild (same as dict_popitem)
            let this = self.get_mut(vm.heap);
            this.indices.clear();
            for (idx, e) in this.entries.iter().enumerate() {
                this.indices.insert_unique(e.hash, idx, |&i| this.entries[i].hash);
            }
            Ok(Some((entry.key, entry.value)))
        } else {
            Ok(None)
        }
    }
}

impl Dict {
    /// Returns the number of key-value pairs in the dict.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Returns true if the dict is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Returns an iterator over references to (key, value) pairs.
    pub fn iter(&self) -> DictEntriesIter<'_> {
        self.into_iter()
    }

    /// Returns the key at the given iteration index, or None if out of bounds.
    ///
    /// Used for index-based iteration in for loops. Returns a reference to
    /// the key at the given position in insertion order.
    pub fn key_at(&self, index: usize) -> Option<&Value> {
        self.entries.get(index).map(|e| &e.key)
    }

    /// Returns the value at the given iteration index, or None if out of bounds.
    ///
    /// Dictionary views use this to produce live `dict_values` iteration directly
    /// from the underlying storage without copying the dictionary.
    pub fn value_at(&self, index: usize) -> Option<&Value> {
        self.entries.get(index).map(|e| &e.value)
    }

    /// Returns the key-value pair at the given iteration index, or None if out of bounds.
    ///
    /// This accessor keeps dict-view iteration logic out of the storage internals
    /// while still allowing `dict_items` to produce tuples on demand.
    pub fn item_at(&self, index: usize) -> Option<(&Value, &Value)> {
        self.entries.get(index).map(|entry| (&entry.key, &entry.value))
    }

    /// Creates a dict from the `dict([mapping_or_pairs], **kwargs)` constructor call.
    ///
    /// Supported forms:
    /// - `dict()` returns an empty dict.
    /// - `dict(existing_dict)` returns a shallow copy of the dict.
    /// - `dict(iterable_of_pairs)` consumes `(key, value)` pairs from the iterable.
    /// - `dict(**kwargs)` inserts keyword arguments as string keys.
    ///
    /// Keyword arguments are applied after the optional positional source, matching
    /// CPython precedence (`dict([('a', 1)], a=2)` yields `{'a': 2}`).
    ///
    /// For now, only real `dict` values use mapping-copy semantics; other values
    /// are interpreted as iterables of pairs.
    pub fn init(vm: &mut VM<'_>, args: ArgValues) -> RunResult<Value> {
        let DictInitArgs { source, extras } = DictInitArgs::from_args(args, vm)?;
        let dict = Self::new();
        let mut dict_guard = DropGuard::new(dict, vm);

        {
            let (dict, vm) = dict_guard.as_parts_mut();
            let mut kwargs_guard = DropGuard::new(extras, vm);

            if let Some(other_value) = source {
                let other_value_guard = DropGuard::new(other_value, kwargs_guard.ctx());
                let other_value = other_value_guard.into_inner();
                dict_merge_from_value(dict, other_value, kwargs_guard.ctx())?;
            }

            let kwargs = kwargs_guard.into_inner();
            dict_merge_from_kwargs(dict, kwargs, vm)?;
        }

        let dict = dict_guard.into_inner();
        let heap_id = vm.heap.allocate(HeapData::Dict(dict));
        Ok(Value::Ref(heap_id))
    }
}

/// Argument shape for `dict([source], **kwargs)`.
///
/// `source` is an optional positional (mapping or iterable of pairs).
/// `extras` collects every additional keyword argument so they can be merged
/// into the dict after the source.
#[derive(FromArgs)]
#[from_args(name = "dict")]
struct DictInitArgs {
    #[from_args(pos_only, default)]
    source: Option<Value>,
    #[from_args(varkwargs)]
    extras: KwargsValues,
}

/// Heap-only equality for probe candidates, mirroring `py_eq` for pairs whose
/// comparison can never re-enter the VM.
///
/// Returns `None` when the pair may need the VM (user `__eq__`, container
/// recursion, or a cross-type pair the native helpers do not decide); the
/// caller then falls back to the guarded snapshot path. Runs no user code, so
/// it is safe to call while the index-table borrow is held.
pub(crate) fn probe_native_eq(candidate: &Value, key: &Value, vm: &VM<'_>) -> Option<bool> {
    // `py_eq` starts with identity, so this must too (it is what makes a NaN
    // key findable).
    if candidate.is(key) {
        Some(true)
    } else {
        match candidate {
            Value::Bool(b) => eq_i64(i64::from(*b), key, vm),
            Value::Int(i) => eq_i64(*i, key, vm),
            Value::Float(f) => eq_f64(*f, key, vm),
            Value::InternLongInt(id) => eq_bigint(vm.interns.get_long_int(*id), key, vm),
            Value::InternString(id) => eq_str(vm.interns.get_str(*id), key, vm),
            Value::InternBytes(id) => eq_bytes(vm.interns.get_bytes(*id), key, vm),
            Value::Ref(id) => match vm.heap.get(*id) {
                HeapData::Str(s) => eq_str(s.as_str(), key, vm),
                HeapData::Bytes(b) => eq_bytes(b.as_slice(), key, vm),
                HeapData::LongInt(li) => eq_bigint(li.inner(), key, vm),
                _ => None,
            },
            _ => None,
        }
    }
}

/// Whether an equality comparison involving `value` can never re-enter the VM.
///
/// True for immediates and for heap types whose `py_eq` is fully native.
/// Instances and dataclasses dispatch to user `__eq__`, and containers
/// (tuples, frozensets) recurse into element comparisons that might; those and
/// any unlisted heap type return false. A conservative fast-path filter for
/// the dict/set probes, not a complete classification.
pub(crate) fn eq_is_native(value: &Value, heap: &Heap) -> bool {
    match value {
        Value::Ref(id) => matches!(
            heap.get(*id),
            HeapData::Str(_) | HeapData::Bytes(_) | HeapData::LongInt(_) | HeapData::Range(_)
        ),
        _ => true,
    }
}

/// How a probe continued after user `__eq__` code may have mutated the
/// container; shared by the dict and set lookups, which mirror each other.
pub(crate) enum ProbeOutcome {
    /// The key was found in this entry.
    Found(usize),
    /// Every live candidate has been compared, none matched.
    Missing,
    /// A candidate moved mid-probe, so the whole probe must start over.
    Restart,
}

impl<'h> HeapRead<'h, Dict> {
    fn find_index_hash(&self, key: &Value, vm: &mut VM<'h>) -> RunResult<(Option<usize>, u64)> {
        let hash = key
            .py_hash(vm)?
            .ok_or_else(|| ExcType::type_error_unhashable_dict_key(&key.py_type_name(vm)))?
            .raw();

        // Candidates are snapshotted so `py_eq` can run without the index-table
        // borrow held, and revalidated either side of it: only one that moved
        // restarts the probe, as in CPython's `lookdict`. Restarts poll the
        // limits, since each callback restarts the VM's dispatch countdown.

        // False for anything whose `__eq__` could mutate the dict; when true,
        // revalidation and the miss continuation are skipped (the str/int path).
        let key_native = eq_is_native(key, vm.heap);

        'restart: loop {
            // Collected inline rather than through `probe_candidates`: every
            // lookup runs this, and moving the buffers out of a call shows up
            // in the dict benchmarks.
            let mut candidate_indices: SmallVec<[usize; 2]> = SmallVec::new();
            let mut candidate_keys: SmallVec<[Value; 2]> = SmallVec::new();
            let mut all_native = key_native;
            let this = self.get(vm.heap);
            // The `find` predicate doubles as the probe walk: native pairs are
            // compared inline (a `true` stops at the match), and only pairs
            // that may need user code are cloned for the guarded loop below.
            // Once one is deferred, later candidates queue behind it so
            // comparisons keep CPython's probe order.
            let found = this
                .indices
                .find(hash, |v| {
                    let entry = &this.entries[*v];
                    if entry.hash != hash {
                        return false;
                    }
                    if candidate_indices.is_empty()
                        && let Some(eq) = probe_native_eq(&entry.key, key, vm)
                    {
                        eq
                    } else {
                        candidate_indices.push(*v);
                        candidate_keys.push(entry.key.clone_with_heap(vm.heap));
                        all_native = all_native && eq_is_native(&entry.key, vm.heap);
                        false
                    }
                })
                .copied();
            // Guarded before the early returns below: the deferred keys are
            // owned, and only the `candidate_indices.is_empty()` condition in
            // the predicate above keeps them empty on the `found` path.
            defer_drop!(candidate_keys, vm);
            if let Some(index) = found {
                return Ok((Some(index), hash));
            }
            if candidate_indices.is_empty() {
                return Ok((None, hash));
            }

            for (&candidate_index, candidate_key) in candidate_indices.iter().zip(candidate_keys.iter()) {
                if !all_native && !self.probe_valid(candidate_index, hash, candidate_key, vm) {
                    vm.heap.tracker.check_memory_time()?;
                    continue 'restart;
                }
                // CPython compares the stored key on the left.
                let eq = candidate_key.py_eq(key, vm)?;
                if !all_native && !self.probe_valid(candidate_index, hash, candidate_key, vm) {
                    vm.heap.tracker.check_memory_time()?;
                    continue 'restart;
                }
                if eq {
                    return Ok((Some(candidate_index), hash));
                }
            }

            // Nothing matched. Comparisons can themselves add colliding keys the
            // snapshot never saw, so a pass that ran any hands over to the
            // mutation-aware continuation — unless none could run user code.
            if all_native {
                return Ok((None, hash));
            }
            match self.probe_after_compare(hash, key, candidate_keys, vm)? {
                ProbeOutcome::Found(index) => return Ok((Some(index), hash)),
                ProbeOutcome::Missing => return Ok((None, hash)),
                // a candidate moved: fall through to the next probe from scratch
                ProbeOutcome::Restart => (),
            }
        }
    }

    /// Continues a probe whose comparisons all missed, in case one of them
    /// mutated the dict and added a colliding key.
    ///
    /// Re-reads the candidates until a pass finds nothing new, skipping keys
    /// already compared so no user `__eq__` runs twice, as CPython's live probe
    /// chain does. Inline-compared native pairs are deliberately left out of
    /// the seen set: repeating one is side-effect-free, and tracking them would
    /// put clone and identity bookkeeping on the pure-native fast path.
    fn probe_after_compare(
        &self,
        hash: u64,
        key: &Value,
        already_compared: &[Value],
        vm: &mut VM<'h>,
    ) -> RunResult<ProbeOutcome> {
        // The clones keep every compared key alive so its heap slot cannot be
        // recycled into a new key that would then be skipped by identity.
        let compared: SmallVec<[Value; 2]> = already_compared.iter().map(|k| k.clone_with_heap(vm.heap)).collect();
        defer_drop_mut!(compared, vm);
        // Identity set for O(1) seen-checks — a linear scan is quadratic over
        // a fully colliding dict, all skips, before the poll below is reached.
        let mut compared_ids: AHashSet<Identity> = compared.iter().map(Value::id).collect();

        loop {
            // Polled up front so every entry checks the limits at least once:
            // the comparisons that brought us here ran user code, restarting
            // the VM dispatch countdown, so no checkpoint fires otherwise —
            // including on the no-mutation pass that returns `Missing`.
            vm.heap.tracker.check_memory_time()?;
            let (candidate_indices, candidate_keys) = self.probe_candidates(hash, vm);
            defer_drop!(candidate_keys, vm);
            let mut compared_any = false;

            for (&candidate_index, candidate_key) in candidate_indices.iter().zip(candidate_keys.iter()) {
                if !compared_ids.insert(candidate_key.id()) {
                    continue;
                }
                if !self.probe_valid(candidate_index, hash, candidate_key, vm) {
                    vm.heap.tracker.check_memory_time()?;
                    return Ok(ProbeOutcome::Restart);
                }
                compared.push(candidate_key.clone_with_heap(vm.heap));
                compared_any = true;
                // CPython compares the stored key on the left.
                let eq = candidate_key.py_eq(key, vm)?;
                if !self.probe_valid(candidate_index, hash, candidate_key, vm) {
                    vm.heap.tracker.check_memory_time()?;
                    return Ok(ProbeOutcome::Restart);
                }
                if eq {
                    return Ok(ProbeOutcome::Found(candidate_index));
                }
            }

            if !compared_any {
                return Ok(ProbeOutcome::Missing);
            }
        }
    }

    /// Snapshots the live entries colliding on `hash`: their indices, plus an
    /// owned reference to each of their keys.
    ///
    /// Cloning the keys lets `py_eq` run without the index-table borrow held;
    /// the caller owns the returned keys and must drop them. Only the
    /// mutation-aware continuation calls this — the fast path above inlines the
    /// same collection.
    fn probe_candidates(&self, hash: u64, vm: &VM<'h>) -> (SmallVec<[usize; 2]>, SmallVec<[Value; 2]>) {
        let mut indices: SmallVec<[usize; 2]> = SmallVec::new();
        let mut keys: SmallVec<[Value; 2]> = SmallVec::new();
        let this = self.get(vm.heap);
        this.indices.find(hash, |v| {
            if this.entries[*v].hash == hash {
                indices.push(*v);
                keys.push(this.entries[*v].key.clone_with_heap(vm.heap));
            }
            false
        });
        (indices, keys)
    }

    /// Checks that a snapshotted candidate still names the same live entry.
    ///
    /// The caller checks before and after `py_eq`; a mismatch restarts the probe.
    #[inline]
    fn probe_valid(&self, index: usize, hash: u64, key: &Value, vm: &VM<'h>) -> bool {
        let this = self.get(vm.heap);
        this.entries
            .get(index)
            .is_some_and(|entry| entry.hash == hash && entry.key.is(key))
    }

    /// Checks whether the dict contains a given key.
    pub(crate) fn contains_key(&self, key: &Value, vm: &mut VM<'h>) -> RunResult<bool> {
        let (opt_index, _hash) = self.find_index_hash(key, vm)?;
        Ok(opt_index.is_some())
    }

    /// Returns a stack-borrowed lending iterator over the dict's
    /// `(key, value)` entries in insertion order, holding a recursion-depth
    /// token for its lifetime.
    ///
    /// Named `iter` despite returning a non-stdlib lending iterator (see
    /// [`DictIter`]) because that's the obvious entry point for "iterate
    /// this container".
    #[expect(clippy::iter_not_returning_iterator)]
    pub(crate) fn iter(&self, vm: &mut VM<'h>) -> RunResult<DictIter<'_, 'h>> {
        DictIter::new(self, vm)
    }

    /// Merges key-value pairs from a dict or iterable-of-pairs into self via HeapRead.
    ///
    /// For dict sources, uses HeapReader::read() to access the source dict through
    /// the heap, enabling self-referential updates like `d.update(d)`.
    fn merge_from_value(&mut self, other_value: Value, vm: &mut VM<'h>) -> RunResult<()> {
        let mut guard = DropGuard::new(other_value, vm);
        let (other_value, vm) = guard.as_parts_mut();
        if let Value::Ref(id) = other_value {
            let src_id = *id;
            if let HeapReadOutput::Dict(src) = vm.heap.read(src_id) {
                let iter = src.iter(vm)?;
                defer_drop_mut!(iter, vm);
                while let Some((key, value)) = iter.next_owned(vm)? {
                    let old_value = self.set(key, value, vm)?;
                    old_value.drop_with(vm);
                }

                // guard drops other_value here
                return Ok(());
            }
        }

        // Non-dict values are interpreted as iterable-of-pairs
        let (other_value, vm) = guard.into_parts();
        self.merge_from_iterable_pairs(other_value, vm)
    }

    /// Merges key-value pairs from an iterable of 2-item pairs.
    fn merge_from_iterable_pairs(&mut self, iterable: Value, vm: &mut VM<'h>) -> RunResult<()> {
        let iter = iterable.into_py_iter(vm)?;
        defer_drop!(iter, vm);
        let mut iter = iter.read(vm);

        while let Some(item) = iter.py_next(vm)? {
            let pair_iter = item.into_py_iter(vm)?;
            defer_drop!(pair_iter, vm);
            let mut pair_iter = pair_iter.read(vm);

            let Some(key) = pair_iter.py_next(vm)? else {
                return Err(ExcType::type_error(
                    "dictionary update sequence element has length 0; 2 is required",
                ));
            };
            let mut key_guard = DropGuard::new(key, vm);

            let Some(value) = pair_iter.py_next(key_guard.ctx())? else {
                return Err(ExcType::type_error(
                    "dictionary update sequence element has length 1; 2 is required",
                ));
            };
            let mut value_guard = DropGuard::new(value, key_guard.ctx());

            if let Some(extra) = pair_iter.py_next(value_guard.ctx())? {
                extra.drop_with(value_guard.ctx());
                return Err(ExcType::type_error(
                    "dictionary update sequence element has length > 2; 2 is required",
                ));
            }

            let value = value_guard.into_inner();
            let key = key_guard.into_inner();

            if let Some(old_value) = self.set(key, value, vm)? {
                old_value.drop_with(vm);
            }
        }

        Ok(())
    }

    /// Merges kwargs into self.
    fn merge_from_kwargs(&mut self, kwargs: KwargsValues, vm: &mut VM<'h>) -> RunResult<()> {
        let kwargs_iter = kwargs.into_iter();
        defer_drop_mut!(kwargs_iter, vm);
        for (key, value) in kwargs_iter {
            let old_value = self.set(key, value, vm)?;
            old_value.drop_with(vm);
        }
        Ok(())
    }
}

/// Iterator over borrowed (key, value) pairs in a dict.
pub(crate) struct DictEntriesIter<'a>(slice::Iter<'a, DictEntry>);

impl<'a> Iterator for DictEntriesIter<'a> {
    type Item = (&'a Value, &'a Value);
    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|e| (&e.key, &e.value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }

    fn fold<B, F>(self, init: B, mut f: F) -> B
    where
        F: FnMut(B, Self::Item) -> B,
    {
        self.0.fold(init, |acc, e| f(acc, (&e.key, &e.value)))
    }
}

impl<'a> IntoIterator for &'a Dict {
    type Item = (&'a Value, &'a Value);
    type IntoIter = DictEntriesIter<'a>;
    fn into_iter(self) -> Self::IntoIter {
        DictEntriesIter(self.entries.iter())
    }
}

/// Iterator over owned (key, value) pairs from a consumed dict.
pub(crate) struct DictIntoIter(vec::IntoIter<DictEntry>);

impl Iterator for DictIntoIter {
    type Item = (Value, Value);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|e| (e.key, e.value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl ExactSizeIterator for DictIntoIter {}

impl IntoIterator for Dict {
    type Item = (Value, Value);
    type IntoIter = DictIntoIter;
    fn into_iter(self) -> Self::IntoIter {
        DictIntoIter(self.entries.into_iter())
    }
}

/// Stack-borrowed lending iterator over a heap-allocated [`Dict`]'s
/// `(key, value)` entries in insertion order.
///
/// Borrows a [`HeapRead`] for its lifetime, so the heap entry is pinned by
/// the reader count for the duration of iteration.
///
/// **Yield modes.** Pick the variant that matches the caller's natural
/// pattern to avoid redundant `clone_with_heap` / `drop_with` work:
///
/// - [`next`](Self::next) returns `Option<(&Value, &Value)>`. The iterator
///   owns the most-recently-yielded pair (using [`Value::Undefined`] as the
///   empty sentinel) and drops the previous pair at the start of each call,
///   so "use and discard" call sites do **not** need a per-item
///   `defer_drop!`.
/// - [`next_value`](Self::next_value) returns only a borrowed value, avoiding
///   key refcount churn for value-only operations.
/// - [`next_owned`](Self::next_owned) returns `Option<(Value, Value)>` and
///   clones straight into the return value, leaving the internal slot
///   `Undefined`. Prefer this when feeding pairs into a sink that takes
///   ownership (e.g. [`HeapRead::set`], `Set::add`) — going through `next`
///   forces a second `clone_with_heap` per element.
///
/// Mixing the yield modes is supported: every step drops whatever the slot
/// held before doing its work.
///
/// **Recursion guard.** Acquires a [`RecursionToken`] at construction and
/// releases it via [`DropWithContext`]. The iterator MUST be wrapped in
/// [`defer_drop_mut!`] so the token (and any in-flight pair) is released on
/// every exit path — dict iteration almost always calls back into
/// `py_eq` / `py_hash` (membership lookups, comparison) which recurse on
/// cyclic structures.
///
/// **Mutation policy.** The initial length is captured at construction. If
/// the dict's size changes between steps, the next step returns
/// `RuntimeError: dictionary changed size during iteration` (matching
/// CPython and Monty's dict-iterator behavior). Same-size updates (replacing
/// a value at an existing key) are allowed and observable.
pub(crate) struct DictIter<'a, 'h> {
    dict: &'a HeapRead<'h, Dict>,
    index: usize,
    expected_len: usize,
    token: RecursionToken,
    /// Most-recently-yielded pair. Both fields are `Value::Undefined` when
    /// nothing is held — drops on that variant are no-ops, so `next` can
    /// unconditionally release the previous slot before fetching the next.
    current_key: Value,
    current_value: Value,
}

impl<'a, 'h> DictIter<'a, 'h> {
    fn new(dict: &'a HeapRead<'h, Dict>, vm: &mut VM<'h>) -> RunResult<Self> {
        let expected_len = dict.get(vm.heap).entries.len();
        let token = vm.recursion_token()?;
        Ok(Self {
            dict,
            index: 0,
            expected_len,
            token,
            current_key: Value::Undefined,
            current_value: Value::Undefined,
        })
    }

    /// Advances the iterator and returns borrows of the next `(key, value)`
    /// pair, or `Ok(None)` on exhaustion. The returned references are valid
    /// until the next call to `next` (or until the iterator is dropped).
    ///
    /// Returns `Err(RuntimeError)` if the dict's size has changed since
    /// construction.
    pub(crate) fn next<'i>(&'i mut self, vm: &mut VM<'h>) -> RunResult<Option<(&'i Value, &'i Value)>> {
        let Some(entry_index) = self.advance(vm)? else {
            return Ok(None);
        };
        let entry = &self.dict.get(vm.heap).entries[entry_index];
        self.current_key = entry.key.clone_with_heap(vm.heap);
        self.current_value = entry.value.clone_with_heap(vm.heap);
        Ok(Some((&self.current_key, &self.current_value)))
    }

    /// Advances the iterator and returns a borrow of the next value.
    ///
    /// Prefer this for value-only operations so dictionary keys are not cloned.
    /// The returned reference is valid until the next call that advances the
    /// iterator, or until the iterator is dropped.
    pub(crate) fn next_value<'i>(&'i mut self, vm: &mut VM<'h>) -> RunResult<Option<&'i Value>> {
        let Some(entry_index) = self.advance(vm)? else {
            return Ok(None);
        };
        let entry = &self.dict.get(vm.heap).entries[entry_index];
        self.current_value = entry.value.clone_with_heap(vm.heap);
        Ok(Some(&self.current_value))
    }

    /// Advances the iterator and returns the next `(key, value)` pair as
    /// owned values, transferring ownership to the caller.
    ///
    /// Prefer this over [`next`](Self::next) when the call site immediately
    /// needs owned values — e.g. to feed into a function that consumes a
    /// `Value` like `Set::add` or `Dict::set`. Going through `next` instead
    /// would clone the pair into the iterator's internal slot, then force the
    /// caller to re-`clone_with_heap` it, doubling the refcount churn.
    ///
    /// The iterator's internal slot is left `Undefined` after this call, so
    /// callers can freely mix `next` and `next_owned` on the same iterator.
    pub(crate) fn next_owned(&mut self, vm: &mut VM<'h>) -> RunResult<Option<(Value, Value)>> {
        let Some(entry_index) = self.advance(vm)? else {
            return Ok(None);
        };
        let entry = &self.dict.get(vm.heap).entries[entry_index];
        let pair = (entry.key.clone_with_heap(vm.heap), entry.value.clone_with_heap(vm.heap));
        Ok(Some(pair))
    }

    /// Shared step for the iterator's borrowed and owned yield modes.
    ///
    /// Releases the previously-yielded slot (no-op when each slot is
    /// `Undefined`), runs the amortized time check and the dict mutation
    /// guard, then returns the entry index to read at — or `Ok(None)` when
    /// the iterator is exhausted. Bumps `self.index` on success.
    fn advance(&mut self, vm: &mut VM<'h>) -> RunResult<Option<usize>> {
        mem::replace(&mut self.current_key, Value::Undefined).drop_with(vm.heap);
        mem::replace(&mut self.current_value, Value::Undefined).drop_with(vm.heap);
        vm.heap.tracker.check_time_every(self.index)?;
        let current = self.dict.get(vm.heap);
        if current.entries.len() != self.expected_len {
            return Err(ExcType::runtime_error_dict_changed_size());
        }
        if self.index >= self.expected_len {
            return Ok(None);
        }
        let entry_index = self.index;
        self.index += 1;
        Ok(Some(entry_index))
    }
}

impl<'h, C: ContainsVM<'h>> DropWithContext<C> for DictIter<'_, 'h> {
    fn drop_with(self, container: &mut C) {
        self.current_key.drop_with(container);
        self.current_value.drop_with(container);
        self.token.drop_with(container);
    }
}

impl<'h> HeapRead<'h, Dict> {
    /// Writes the plain `{k: v, ...}` mapping repr — the body shared by `dict`
    /// and the `defaultdict(<factory>, <body>)` wrapper.
    fn write_map_repr(&self, f: &mut impl Write, vm: &mut VM<'h>, heap_ids: &mut LazyHeapSet) -> RunResult<()> {
        if self.get(vm.heap).is_empty() {
            return Ok(f.write_str("{}")?);
        }

        // Check depth limit before recursing
        let Ok(mut guard) = vm.recursion_guard() else {
            return Ok(f.write_str("{...}")?);
        };
        let vm = &mut *guard;

        f.write_char('{')?;
        // Iterate the live entries like CPython, cloning only the current pair
        // (refcount bumps — required because the reprs below run user
        // `__repr__` code that may drop the dict's references). Bounds are
        // re-checked every index, so mid-repr mutation cannot panic: inserted
        // entries append and are printed (matching CPython); a deletion shifts
        // `entries` where CPython leaves a tombstone, so later entries can be
        // skipped (see `limitations/builtins.md`).
        for i in 0.. {
            let Some((key, value)) = self.get(vm.heap).item_at(i) else {
                break;
            };
            let pair = (key.clone_with_heap(vm.heap), value.clone_with_heap(vm.heap));
            defer_drop!(pair, vm);
            let (key, value) = pair;
            if i > 0 {
                if repr_check_time(i, vm) {
                    f.write_str(", ...[timeout]")?;
                    break;
                }
                f.write_str(", ")?;
            }
            key.py_repr_fmt(f, vm, heap_ids)?;
            f.write_str(": ")?;
            value.py_repr_fmt(f, vm, heap_ids)?;
        }
        f.write_char('}')?;

        Ok(())
    }

    /// Writes the `{k: v, ...}` body for a Counter repr, ordered by count
    /// descending (`most_common` order) rather than insertion order.
    fn write_counter_map_repr(&self, f: &mut impl Write, vm: &mut VM<'h>, heap_ids: &mut LazyHeapSet) -> RunResult<()> {
        let Ok(mut guard) = vm.recursion_guard() else {
            return Ok(f.write_str("{...}")?);
        };
        let vm = &mut *guard;

        // Snapshot the entries BEFORE ordering: the reprs printed below run
        // user `__repr__` code that can mutate the Counter, so the ordered
        // indices must refer to the snapshot, not live entries.
        let pairs = self.clone_all_pairs(vm)?;
        defer_drop!(pairs, vm);
        // The counts clone and the order indices live alongside the pair
        // snapshot — preflight them too so an over-budget Counter raises a
        // graceful `MemoryError` instead of hitting the allocator hard limit.
        vm.heap
            .tracker
            .check_allocation(pairs.len().saturating_mul(VALUE_SIZE + mem::size_of::<usize>()))?;
        let counts = pairs.iter().map(|(_, value)| value.clone_with_heap(vm.heap)).collect();
        let order = counter_order(counts, vm)?;
        f.write_char('{')?;
        for (n, &i) in order.iter().enumerate() {
            if n > 0 {
                if repr_check_time(n, vm) {
                    f.write_str(", ...[timeout]")?;
                    break;
                }
                f.write_str(", ")?;
            }
            let (key, value) = &pairs[i];
            key.py_repr_fmt(f, vm, heap_ids)?;
            f.write_str(": ")?;
            value.py_repr_fmt(f, vm, heap_ids)?;
        }
        f.write_char('}')?;
        Ok(())
    }

    /// Clones every entry as a refcount-bumped `(key, value)` pair, for the
    /// Counter repr: printing runs user `__repr__` code against indices from
    /// the ordering pass, so live indices would panic or skew once that code
    /// mutates the Counter — and CPython's `most_common()` snapshots the same way.
    ///
    /// Preflights the slot bytes so an over-budget clone raises a graceful
    /// `MemoryError` instead of bursting past the allocator's hard limit.
    pub(crate) fn clone_all_pairs(&self, vm: &mut VM<'h>) -> RunResult<Vec<(Value, Value)>> {
        let len = self.get(vm.heap).len();
        vm.heap.tracker.check_allocation(len.saturating_mul(2 * VALUE_SIZE))?;
        let mut pairs = Vec::with_capacity(len);
        // No user code runs during the snapshot, so `len` stays current and
        // the `expect`s cannot fire.
        for i in 0..len {
            let dict = self.get(vm.heap);
            let key = dict.key_at(i).expect("index in range").clone_with_heap(vm.heap);
            let value = dict.value_at(i).expect("index in range").clone_with_heap(vm.heap);
            pairs.push((key, value));
        }
        Ok(pairs)
    }

    /// Handles dict attribute assignment. Only `defaultdict.default_factory` is
    /// settable, and it accepts *any* value (see the note below); it returns the
    /// previous factory for the caller to drop. Every other attribute — and any
    /// attribute on a plain dict — raises the generic no-setattr
    /// `AttributeError`. Consumes `value`.
    fn set_default_factory_attr(
        &mut self,
        attr: &EitherStr,
        value: Value,
        vm: &mut VM<'h>,
    ) -> RunResult<Option<Value>> {
        if self.get(vm.heap).is_defaultdict() && attr.static_string() == Some(StaticStrings::DefaultFactory) {
            // Deliberately unvalidated: CPython's setter is a plain member
            // assignment, so a non-callable is stored and only raises
            // `'int' object is not callable` when a missing key finally calls it.
            // (The *constructor* does check — see `modules::collections::defaultdict`.)
            if matches!(value, Value::None) {
                Ok(self.get_mut(vm.heap).replace_default_factory(None))
            } else {
                Ok(self.get_mut(vm.heap).replace_default_factory(Some(value)))
            }
        } else {
            let type_name = self.get(vm.heap).kind_type().name(vm.heap, vm.interns);
            value.drop_with(vm);
            Err(ExcType::attribute_error_no_setattr(&type_name, attr.as_str(vm.interns)))
        }
    }
}

/// `PyTrait` implementation for a heap-backed `Dict` object.
///
/// All methods access the dict data through short-lived borrows from the heap via
/// `self.get(vm.heap)`, and mutation methods use `self.get_mut(vm.heap)`. This avoids
/// taking the dict out of the heap, enabling self-referential operations like `d.update(d)`.
impl<'h> PyTrait<'h> for HeapObjectRead<'h, Dict> {
    fn py_is_iterable(&self, _vm: &VM<'h>) -> bool {
        true
    }

    /// `in` on a dict tests its *keys*, matching CPython.
    fn py_contains_impl(&self, item: &Value, vm: &mut VM<'h>) -> RunResult<Option<bool>> {
        self.contains_key(item, vm).map(Some)
    }

    fn py_type(&self, vm: &VM<'h>) -> Type {
        self.get(vm.heap).kind_type()
    }

    fn py_set_attr(&mut self, name: &EitherStr, value: Value, vm: &mut VM<'h>) -> RunResult<()> {
        let old_value = self.set_default_factory_attr(name, value, vm)?;
        old_value.drop_with(vm);
        Ok(())
    }

    fn py_iter(&self, vm: &mut VM<'h>) -> RunResult<Value> {
        Ok(DictKeyIterator::allocate(self.id(), self.get(vm.heap).len(), vm))
    }

    fn py_len(&self, vm: &VM<'h>) -> Option<usize> {
        Some(self.get(vm.heap).len())
    }

    fn py_eq_impl(&self, other: &Value, vm: &mut VM<'h>) -> RunResult<Option<bool>> {
        match other.read_heap(vm) {
            Some(HeapReadOutput::Dict(other)) => {
                // Two Counters compare as multisets (zero counts ignored); any
                // other pairing is plain dict equality.
                if self.get(vm.heap).is_counter() && other.get(vm.heap).is_counter() {
                    Ok(Some(self.eq_counter(&other, vm)?))
                } else {
                    Ok(Some(self.eq_dict(&other, vm)?))
                }
            }
            _ => Ok(None),
        }
    }

    fn py_bool(&self, vm: &mut VM<'h>) -> RunResult<bool> {
        Ok(!self.get(vm.heap).is_empty())
    }

    /// Two Counters compare as multisets; every other pairing defers to `py_cmp`,
    /// which has no dict ordering and so raises `TypeError` — CPython's
    /// `Counter.__lt__` likewise returns `NotImplemented` for a non-Counter,
    /// which is why `Counter(a=1) < {'a': 2}` never becomes a dict comparison.
    fn py_cmp_op(&self, other: &Value, op: CmpOperator, vm: &mut VM<'h>) -> RunResult<Option<bool>> {
        let cmp = match op {
            CmpOperator::Lt => CounterCmp::Lt,
            CmpOperator::LtE => CounterCmp::Le,
            CmpOperator::Gt => CounterCmp::Gt,
            CmpOperator::GtE => CounterCmp::Ge,
            // Only the four ordering operators reach `py_cmp_op`.
            _ => return Ok(None),
        };
        let Some(HeapReadOutput::Dict(other)) = other.read_heap(vm) else {
            return Ok(None);
        };
        if self.get(vm.heap).is_counter() && other.get(vm.heap).is_counter() {
            Ok(Some(counter_compare(self, &other, cmp, vm)?))
        } else {
            Ok(None)
        }
    }

    fn py_neg_impl(&self, vm: &mut VM<'h>) -> RunResult<Option<Value>> {
        self.counter_unary(true, vm)
    }

    fn py_pos_impl(&self, vm: &mut VM<'h>) -> RunResult<Option<Value>> {
        self.counter_unary(false, vm)
    }

    fn py_add_impl(&self, other: &Value, vm: &mut VM<'h>) -> RunResult<Option<Value>> {
        self.counter_binary(other, CounterOp::Add, vm)
    }

    fn py_sub_impl(&self, other: &Value, vm: &mut VM<'h>) -> RunResult<Option<Value>> {
        self.counter_binary(other, CounterOp::Sub, vm)
    }

    fn py_and_impl(&self, other: &Value, vm: &mut VM<'h>) -> RunResult<Option<Value>> {
        self.counter_binary(other, CounterOp::And, vm)
    }

    fn py_or_impl(&self, other: &Value, vm: &mut VM<'h>) -> RunResult<Option<Value>> {
        self.counter_binary(other, CounterOp::Or, vm)
    }

    fn py_iadd_impl(&mut self, other: &Value, vm: &mut VM<'h>) -> RunResult<bool> {
        self.counter_inplace(other, CounterOp::Add, vm)
    }

    fn py_isub_impl(&mut self, other: &Value, vm: &mut VM<'h>) -> RunResult<bool> {
        self.counter_inplace(other, CounterOp::Sub, vm)
    }

    fn py_iand_impl(&mut self, other: &Value, vm: &mut VM<'h>) -> RunResult<bool> {
        self.counter_inplace(other, CounterOp::And, vm)
    }

    fn py_ior_impl(&mut self, other: &Value, vm: &mut VM<'h>) -> RunResult<bool> {
        self.counter_inplace(other, CounterOp::Or, vm)
    }

    fn py_repr_fmt(&self, f: &mut impl Write, vm: &mut VM<'h>, heap_ids: &mut LazyHeapSet) -> RunResult<()> {
        // A defaultdict renders as `defaultdict(<factory repr>, <dict repr>)`.
        if self.get(vm.heap).is_defaultdict() {
            f.write_str("defaultdict(")?;
            let factory = self.get(vm.heap).default_factory().map(|v| v.clone_with_heap(vm.heap));
            match factory {
                Some(factory) => {
                    defer_drop!(factory, vm);
                    factory.py_repr_fmt(f, vm, heap_ids)?;
                }
                None => f.write_str("None")?,
            }
            f.write_str(", ")?;
            self.write_map_repr(f, vm, heap_ids)?;
            return Ok(f.write_char(')')?);
        }
        // A Counter renders as `Counter({<items in most-common order>})`, or
        // `Counter()` when empty.
        if self.get(vm.heap).is_counter() {
            if self.get(vm.heap).is_empty() {
                return Ok(f.write_str("Counter()")?);
            }
            f.write_str("Counter(")?;
            self.write_counter_map_repr(f, vm, heap_ids)?;
            return Ok(f.write_char(')')?);
        }
        self.write_map_repr(f, vm, heap_ids)
    }

    fn py_getattr(&self, attr: &EitherStr, vm: &mut VM<'h>) -> RunResult<Option<CallResult>> {
        // A defaultdict exposes `default_factory`; every other attribute (and all
        // attributes on a plain dict) falls through to the caller's generic error.
        if self.get(vm.heap).is_defaultdict() && attr.static_string() == Some(StaticStrings::DefaultFactory) {
            let factory = self
                .get(vm.heap)
                .default_factory()
                .map_or(Value::None, |v| v.clone_with_heap(vm.heap));
            Ok(Some(CallResult::Value(factory)))
        } else {
            Ok(None)
        }
    }

    /// A Counter reads a missing key as `0` *without* inserting it. A
    /// defaultdict's miss inserts `factory()` instead, which re-enters the VM
    /// and so cannot happen behind this `&self` — see `heap_data::heap_subscript`.
    fn py_getitem(&self, key: &Value, vm: &mut VM<'h>) -> RunResult<Value> {
        match self.dict_get(key, vm)? {
            Some(value) => Ok(value),
            None if self.get(vm.heap).is_counter() => Ok(Value::Int(0)),
            None => Err(ExcType::key_error(key, vm)),
        }
    }

    fn py_setitem(&mut self, key: Value, value: Value, vm: &mut VM<'h>) -> RunResult<()> {
        // Drop the old value if one was replaced
        if let Some(old_value) = self.set(key, value, vm)? {
            old_value.drop_with(vm);
        }
        Ok(())
    }

    fn py_call_attr(&mut self, vm: &mut VM<'h>, attr: &EitherStr, args: ArgValues) -> RunResult<CallResult> {
        let Some(method) = attr.static_string() else {
            let type_name = self.py_type(vm).name(vm.heap, vm.interns);
            args.drop_with(vm);
            return Err(ExcType::attribute_error(type_name, attr.as_str(vm.interns)));
        };

        let value = match method {
            // Counter-only methods (a plain dict falls through to AttributeError).
            StaticStrings::MostCommon if self.get(vm.heap).is_counter() => counter_most_common(self, args, vm),
            StaticStrings::Elements if self.get(vm.heap).is_counter() => counter_elements(self, args, vm),
            StaticStrings::Total if self.get(vm.heap).is_counter() => {
                args.check_zero_args("total", vm.heap)?;
                counter_total(self, vm)
            }
            StaticStrings::Subtract if self.get(vm.heap).is_counter() => counter_update_method(self, args, true, vm),
            // Counter overrides `update` to add counts, and disables `fromkeys`.
            StaticStrings::Update if self.get(vm.heap).is_counter() => counter_update_method(self, args, false, vm),
            StaticStrings::Fromkeys if self.get(vm.heap).is_counter() => {
                args.drop_with(vm);
                return Err(ExcType::not_implemented(
                    "Counter.fromkeys() is undefined.  Use Counter(iterable) instead.",
                )
                .into());
            }
            StaticStrings::Get => {
                // dict.get() accepts 1 or 2 arguments
                let (key, default) = args.get_one_two_args("get", vm.heap)?;
                defer_drop!(key, vm);
                let default = default.unwrap_or(Value::None);
                let mut default_guard = DropGuard::new(default, vm);
                let vm = default_guard.ctx();
                // Handle the lookup - may fail for unhashable keys
                match self.dict_get(key, vm)? {
                    Some(v) => Ok(v),
                    None => Ok(default_guard.into_inner()),
                }
            }
            StaticStrings::Keys => {
                args.check_zero_args("dict.keys", vm.heap)?;
                let view_id = vm.heap.allocate(HeapData::DictKeysView(DictKeysView::new(self.id())));
                vm.heap.inc_ref(self.id());
                Ok(Value::Ref(view_id))
            }
            StaticStrings::Values => {
                args.check_zero_args("dict.values", vm.heap)?;
                let view_id = vm
                    .heap
                    .allocate(HeapData::DictValuesView(DictValuesView::new(self.id())));
                vm.heap.inc_ref(self.id());
                Ok(Value::Ref(view_id))
            }
            StaticStrings::Items => {
                args.check_zero_args("dict.items", vm.heap)?;
                let view_id = vm.heap.allocate(HeapData::DictItemsView(DictItemsView::new(self.id())));
                vm.heap.inc_ref(self.id());
                Ok(Value::Ref(view_id))
            }
            StaticStrings::Pop => {
                // dict.pop() accepts 1 or 2 arguments (key, optional default)
                let (key, default) = args.get_one_two_args("pop", vm.heap)?;
                defer_drop!(key, vm);
                let mut default_guard = DropGuard::new(default, vm);
                let vm = default_guard.ctx();
                if let Some((old_key, value)) = self.pop(key, vm)? {
                    // Drop the old key - we don't need it
                    old_key.drop_with(vm);
                    Ok(value)
                } else {
                    let (default, vm) = default_guard.into_parts();
                    // No matching key - return default if provided, else KeyError
                    if let Some(d) = default {
                        Ok(d)
                    } else {
                        Err(ExcType::key_error(key, vm))
                    }
                }
            }
            StaticStrings::Clear => {
                args.check_zero_args("dict.clear", vm.heap)?;
                dict_clear(self, vm);
                Ok(Value::None)
            }
            StaticStrings::Copy => {
                args.check_zero_args("dict.copy", vm.heap)?;
                dict_copy(self, vm)
            }
            StaticStrings::Update => dict_update(self, args, vm),
            StaticStrings::Setdefault => dict_setdefault(self, args, vm),
            StaticStrings::Popitem => {
                args.check_zero_args("dict.popitem", vm.heap)?;
                dict_popitem(self, vm)
            }
            // fromkeys is a classmethod but also accessible on instances. CPython
            // builds `cls()`, so a defaultdict receiver yields a defaultdict with
            // no factory (the zero-arg constructor); Counter is rejected above.
            StaticStrings::Fromkeys => {
                let kind = if self.get(vm.heap).is_defaultdict() {
                    DictKind::defaultdict(None)
                } else {
                    DictKind::plain()
                };
                dict_fromkeys(args, kind, vm)
            }
            // `defaultdict.__missing__(key)` — plain dicts have no such method.
            StaticStrings::DunderMissing if self.get(vm.heap).is_defaultdict() => {
                let key = args.get_one_arg("__missing__", vm.heap)?;
                defer_drop!(key, vm);
                defaultdict_missing(self, key, vm)
            }
            _ => {
                let type_name = self.py_type(vm).name(vm.heap, vm.interns);
                args.drop_with(vm);
                return Err(ExcType::attribute_error(type_name, attr.as_str(vm.interns)));
            }
        };
        value.map(CallResult::Value)
    }
}

impl<'h> HeapObjectRead<'h, Dict> {
    /// Runs a binary `Counter` operator (`+ - & |`), which needs *both* operands
    /// to be Counters.
    ///
    /// Any other pairing reports `None` so the caller raises its ordinary
    /// `TypeError`, matching CPython: `Counter.__add__` returns `NotImplemented`
    /// for a non-Counter, and a plain dict has no `+` of its own.
    fn counter_binary(&self, other: &Value, op: CounterOp, vm: &mut VM<'h>) -> RunResult<Option<Value>> {
        let Some(HeapReadOutput::Dict(other)) = other.read_heap(vm) else {
            return Ok(None);
        };
        if self.get(vm.heap).is_counter() && other.get(vm.heap).is_counter() {
            Ok(Some(counter_binary_op(self, &other, op, vm)?))
        } else {
            Ok(None)
        }
    }

    /// Runs an in-place `Counter` operator (`+= -= &= |=`), which needs only the
    /// *left* operand to be a Counter, mutating it and reporting `true`.
    ///
    /// CPython's `__iadd__`/etc. accept any mapping on the right (`c += {'a': 2}`)
    /// and reject a non-mapping with whatever the underlying `other.items()` /
    /// `other[elem]` raises — so once the left is a Counter this owns the
    /// operation, error paths included. A plain dict reports `false`, falling
    /// back to the binary operator.
    fn counter_inplace(&mut self, other: &Value, op: CounterOp, vm: &mut VM<'h>) -> RunResult<bool> {
        if self.get(vm.heap).is_counter() {
            counter_inplace_op(self, other, op, vm)?;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// Runs a unary `Counter` operator (`+c` / `-c`), which strips the counts
    /// that are not positive (negating first for `-c`) into a fresh Counter.
    ///
    /// A plain dict has no unary form and reports `None` for the caller's
    /// `TypeError`.
    fn counter_unary(&self, negate: bool, vm: &mut VM<'h>) -> RunResult<Option<Value>> {
        if self.get(vm.heap).is_counter() {
            Ok(Some(counter_unary_op(self, negate, vm)?))
        } else {
            Ok(None)
        }
    }
}

impl HeapItem for Dict {
    fn py_dec_ref_ids(&mut self, stack: &mut Vec<HeapId>) {
        // Release the default_factory (a defaultdict with a heap-ref factory, e.g.
        // a lambda). MUST be reported here and in `for_each_child_id` identically.
        if let Some(DictSpecial::Default(Some(factory))) = self.kind.0.as_deref_mut()
            && let Value::Ref(id) = factory
        {
            stack.push(*id);
            #[cfg(feature = "memory-model-checks")]
            factory.dec_ref_forget();
        }
        // Skip iteration if no refs - major GC optimization for dicts of primitives
        if !self.contains_refs {
            return;
        }
        for entry in &mut self.entries {
            if let Value::Ref(id) = &entry.key {
                stack.push(*id);
                #[cfg(feature = "memory-model-checks")]
                entry.key.dec_ref_forget();
            }
            if let Value::Ref(id) = &entry.value {
                stack.push(*id);
                #[cfg(feature = "memory-model-checks")]
                entry.value.dec_ref_forget();
            }
        }
    }
}

impl<C: ContainsHeap> DropWithContext<C> for Dict {
    fn drop_with(self, heap: &mut C) {
        self.entries.drop_with(heap);
        self.kind.drop_with(heap);
    }
}

impl<C: ContainsHeap> DropWithContext<C> for DictKind {
    fn drop_with(self, heap: &mut C) {
        if let Some(special) = self.0
            && let DictSpecial::Default(Some(factory)) = *special
        {
            factory.drop_with(heap);
        }
    }
}

impl<C: ContainsHeap> DropWithContext<C> for DictEntry {
    fn drop_with(self, heap: &mut C) {
        self.key.drop_with(heap);
        self.value.drop_with(heap);
    }
}

/// Implements Python's `dict.clear()` method.
///
/// Removes all items from the dict.
fn dict_clear<'h>(dict: &mut HeapRead<'h, Dict>, vm: &mut VM<'h>) {
    dict.get_mut(vm.heap).indices.clear();
    mem::take(&mut dict.get_mut(vm.heap).entries).drop_with(vm.heap);
    // Note: contains_refs stays true even if all refs removed, per conservative GC strategy
}

/// Implements Python's `dict.copy()` method.
///
/// Returns a shallow copy of the dict.
fn dict_copy<'h>(dict: &mut HeapRead<'h, Dict>, vm: &mut VM<'h>) -> RunResult<Value> {
    // Copy all key-value pairs (incrementing refcounts)
    let pairs: Vec<(Value, Value)> = dict
        .get(vm.heap)
        .iter()
        .map(|(k, v)| (k.clone_with_heap(vm), v.clone_with_heap(vm)))
        .collect();

    // `copy()` preserves the subclass: a defaultdict keeps its factory, a
    // Counter stays a Counter. `cloned_kind` clones that factory reference, so
    // guard it — a `from_pairs` failure (e.g. a key `__eq__` raising) would
    // otherwise drop `kind` via Rust's `Drop`, leaking the factory refcount.
    // (`from_pairs` cleans up `pairs` on its own error paths.)
    let kind = dict.get(vm.heap).cloned_kind(vm.heap);
    let mut kind_guard = DropGuard::new(kind, vm);
    let mut new_dict = Dict::from_pairs(pairs, kind_guard.ctx())?;
    new_dict.set_kind(kind_guard.into_inner());
    let heap_id = vm.heap.allocate(HeapData::Dict(new_dict));
    Ok(Value::Ref(heap_id))
}

/// Implements Python's `dict.update([other], **kwargs)` method.
///
/// Updates the dict with key-value pairs from `other` and/or `kwargs`.
/// If `other` is a dict, copies its key-value pairs.
/// If `other` is an iterable, expects pairs of (key, value).
/// Keyword arguments are also added to the dict.
fn dict_update<'h>(dict: &mut HeapRead<'h, Dict>, args: ArgValues, vm: &mut VM<'h>) -> RunResult<Value> {
    let DictUpdateArgs { source, extras } = DictUpdateArgs::from_args(args, vm)?;
    let mut kwargs_guard = DropGuard::new(extras, vm);

    if let Some(other_value) = source {
        let other_value_guard = DropGuard::new(other_value, kwargs_guard.ctx());
        let other_value = other_value_guard.into_inner();
        dict.merge_from_value(other_value, kwargs_guard.ctx())?;
    }

    let kwargs = kwargs_guard.into_inner();
    dict.merge_from_kwargs(kwargs, vm)?;
    Ok(Value::None)
}

/// Argument shape for `dict.update([other], **kwargs)`.
///
/// Mirrors [`DictInitArgs`] — an optional positional source plus arbitrary
/// kwargs that are merged into the dict after the source.
#[derive(FromArgs)]
#[from_args(name = "update")]
struct DictUpdateArgs {
    #[from_args(pos_only, default)]
    source: Option<Value>,
    #[from_args(varkwargs)]
    extras: KwargsValues,
}

/// Merges key-value pairs from either a dict or an iterable of 2-item pairs.
///
/// This is shared between `dict()` construction and `dict.update()` so both
/// entry points follow identical positional-source semantics.
fn dict_merge_from_value(dict: &mut Dict, other_value: Value, vm: &mut VM<'_>) -> RunResult<()> {
    let mut other_value_guard = DropGuard::new(other_value, vm);
    {
        let (other_value, vm) = other_value_guard.as_parts();
        if let Value::Ref(id) = other_value
            && let HeapData::Dict(src_dict) = vm.heap.get(*id)
        {
            // Clone key-value pairs from the source dict.
            let pairs: Vec<(Value, Value)> = src_dict
                .iter()
                .map(|(k, v)| (k.clone_with_heap(vm), v.clone_with_heap(vm)))
                .collect();

            // Apply pairs into the target dict.
            for (key, value) in pairs {
                let old_value = dict.set(key, value, vm)?;
                old_value.drop_with(vm);
            }
            return Ok(());
        }
    }

    // Non-dict values are interpreted as iterable-of-pairs.
    let other_value = other_value_guard.into_inner();
    dict_merge_from_iterable_pairs(dict, other_value, vm)
}

/// Merges key-value pairs from an iterable of 2-item iterables.
///
/// Each item from `iterable` is treated as `(key, value)`. Items with length 0, 1,
/// or greater than 2 raise the same TypeError messages used by `dict.update()`.
fn dict_merge_from_iterable_pairs(dict: &mut Dict, iterable: Value, vm: &mut VM<'_>) -> RunResult<()> {
    let iter = iterable.into_py_iter(vm)?;
    defer_drop!(iter, vm);
    let mut iter = iter.read(vm);

    while let Some(item) = iter.py_next(vm)? {
        // Each item should be a pair (iterable of 2 elements).
        let pair_iter = item.into_py_iter(vm)?;
        defer_drop!(pair_iter, vm);
        let mut pair_iter = pair_iter.read(vm);

        let Some(key) = pair_iter.py_next(vm)? else {
            return Err(ExcType::type_error(
                "dictionary update sequence element has length 0; 2 is required",
            ));
        };
        let mut key_guard = DropGuard::new(key, vm);

        let Some(value) = pair_iter.py_next(key_guard.ctx())? else {
            return Err(ExcType::type_error(
                "dictionary update sequence element has length 1; 2 is required",
            ));
        };
        let mut value_guard = DropGuard::new(value, key_guard.ctx());

        if let Some(extra) = pair_iter.py_next(value_guard.ctx())? {
            extra.drop_with(value_guard.ctx());
            return Err(ExcType::type_error(
                "dictionary update sequence element has length > 2; 2 is required",
            ));
        }

        let value = value_guard.into_inner();
        let key = key_guard.into_inner();

        if let Some(old_value) = dict.set(key, value, vm)? {
            old_value.drop_with(vm);
        }
    }

    Ok(())
}

/// Merges keyword arguments into a dict.
///
/// This helper drains `kwargs` safely on error so all values are dropped
/// correctly, then inserts each key-value pair into `dict`.
fn dict_merge_from_kwargs(dict: &mut Dict, kwargs: KwargsValues, vm: &mut VM<'_>) -> RunResult<()> {
    let kwargs_iter = kwargs.into_iter();
    defer_drop_mut!(kwargs_iter, vm);
    for (key, value) in kwargs_iter {
        let old_value = dict.set(key, value, vm)?;
        old_value.drop_with(vm);
    }
    Ok(())
}

/// Implements Python's `dict.setdefault(key[, default])` method.
///
/// If key is in the dict, return its value.
/// If not, insert key with a value of default (or None) and return default.
fn dict_setdefault<'h>(dict: &mut HeapRead<'h, Dict>, args: ArgValues, vm: &mut VM<'h>) -> RunResult<Value> {
    let (key, default) = args.get_one_two_args("setdefault", vm.heap)?;
    let default = default.unwrap_or(Value::None);
    let mut key_guard = DropGuard::new(key, vm);
    let (key, vm) = key_guard.as_parts();

    if let Some(existing) = dict.dict_get(key, vm)? {
        default.drop_with(vm);
        Ok(existing)
    } else {
        // Key doesn't exist - insert default and return it (cloned before insertion)
        let return_value = default.clone_with_heap(vm);
        let (key, vm) = key_guard.into_parts();
        if let Some(old_value) = dict.set(key, default, vm)? {
            // This shouldn't happen since we checked, but handle it anyway
            old_value.drop_with(vm);
        }
        Ok(return_value)
    }
}

/// Implements Python's `dict.popitem()` method.
///
/// Removes and returns the last inserted key-value pair as a tuple.
/// Raises KeyError if the dict is empty.
fn dict_popitem<'h>(dict: &mut HeapRead<'h, Dict>, vm: &mut VM<'h>) -> RunResult<Value> {
    let this = dict.get_mut(vm.heap);
    if this.is_empty() {
        return Err(ExcType::key_error_popitem_empty_dict());
    }

    // Remove the last entry (LIFO order)
    let entry = this.entries.pop().expect("dict is not empty");

    // Remove from indices - need to find the entry with this index
    // Since we removed the last entry, we need to clear and rebuild indices
    // (This is simpler than trying to find and remove the specific hash entry)
    // TODO: This O(n) rebuild could be optimized by finding and removing the
    // specific hash entry directly from the hashbrown table.
    this.indices.clear();
    for (idx, e) in this.entries.iter().enumerate() {
        this.indices.insert_unique(e.hash, idx, |&i| this.entries[i].hash);
    }

    // Create tuple (key, value)
    Ok(allocate_tuple(smallvec![entry.key, entry.value], vm.heap))
}

// Custom serde implementation for Dict.
// Serializes entries, contains_refs, and kind; rebuilds the indices hash table on deserialize.
impl serde::Serialize for Dict {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut state = serializer.serialize_struct("Dict", 3)?;
        state.serialize_field("entries", &self.entries)?;
        state.serialize_field("contains_refs", &self.contains_refs)?;
        state.serialize_field("kind", &self.kind)?;
        state.end()
    }
}

impl<'de> serde::Deserialize<'de> for Dict {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        struct DictFields {
            entries: Vec<DictEntry>,
            contains_refs: bool,
            kind: DictKind,
        }
        let fields = DictFields::deserialize(deserializer)?;
        // Rebuild the indices hash table from the entries
        let mut indices = HashTable::with_capacity(fields.entries.len());
        for (idx, entry) in fields.entries.iter().enumerate() {
            indices.insert_unique(entry.hash, idx, |&i| fields.entries[i].hash);
        }
        Ok(Self {
            indices,
            entries: fields.entries,
            contains_refs: fields.contains_refs,
            kind: fields.kind,
        })
    }
}

/// Implements Python's `dict.fromkeys(iterable[, value])` classmethod.
///
/// Creates a new dictionary with keys from `iterable` and all values set to `value`
/// (default: None).
///
/// This is a classmethod that can be called directly on the dict type:
/// ```python
/// dict.fromkeys(['a', 'b', 'c'])  # {'a': None, 'b': None, 'c': None}
/// dict.fromkeys(['a', 'b'], 0)    # {'a': 0, 'b': 0}
/// ```
pub fn dict_fromkeys(args: ArgValues, kind: DictKind, vm: &mut VM<'_>) -> RunResult<Value> {
    // CPython names the bare method (`fromkeys expected …`), not `dict.fromkeys`,
    // for both `dict` and the inherited `defaultdict.fromkeys`.
    let (iterable, default) = args.get_one_two_args("fromkeys", vm.heap)?;
    let default = default.unwrap_or(Value::None);
    defer_drop!(default, vm);

    let iter = iterable.into_py_iter(vm)?;
    defer_drop!(iter, vm);
    let mut iter = iter.read(vm);

    let dict = Dict::new();
    let mut dict_guard = DropGuard::new(dict, vm);

    {
        let (dict, vm) = dict_guard.as_parts_mut();

        while let Some(key) = iter.py_next(vm)? {
            let old_value = dict.set(key, default.clone_with_heap(vm), vm)?;
            old_value.drop_with(vm);
        }
    }

    let mut dict = dict_guard.into_inner();
    dict.set_kind(kind);
    let heap_id = vm.heap.allocate(HeapData::Dict(dict));
    Ok(Value::Ref(heap_id))
}

/// Shared dictionary iterator position and mutation sentinel.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct DictIteratorState {
    dict: HeapId,
    index: usize,
    expected_len: usize,
    /// Set once a `next` call has reached the end. Mirrors CPython clearing
    /// `di_dict`: an already-exhausted iterator returns `StopIteration` on every
    /// further call and never re-checks the size, even if the dict was mutated
    /// after exhaustion. Defaulted for backward-compatible snapshot decode.
    #[serde(default)]
    exhausted: bool,
}

impl DictIteratorState {
    /// Validates mutation and returns the next storage index.
    ///
    /// Matches CPython's `dictiterobject`: the size-change guard fires only while
    /// the iterator is still live, and it is checked *before* exhaustion so a
    /// mutation on the final element still raises on the terminating `next()`
    /// (the case a plain `index >= expected_len` check first would mask). Once a
    /// call has reached the end, `exhausted` makes every later call a plain
    /// `StopIteration` with no size check — mutating the dict after the iterator
    /// is spent is not an error.
    fn next_index(&mut self, current_len: usize) -> RunResult<Option<usize>> {
        if self.exhausted {
            Ok(None)
        } else if current_len != self.expected_len {
            Err(ExcType::runtime_error_dict_changed_size())
        } else if self.index >= self.expected_len {
            self.exhausted = true;
            Ok(None)
        } else {
            let index = self.index;
            self.index += 1;
            Ok(Some(index))
        }
    }

    /// Returns the captured number of entries not yet yielded.
    fn size_hint(&self) -> usize {
        self.expected_len.saturating_sub(self.index)
    }
}

/// Iterator yielding dictionary keys.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct DictKeyIterator(DictIteratorState);

/// Iterator yielding dictionary `(key, value)` tuples.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct DictItemIterator(DictIteratorState);

/// Iterator yielding dictionary values.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct DictValueIterator(DictIteratorState);

macro_rules! impl_dict_iterator {
    ($ty:ty, $python_type:expr, $heap_variant:path, $next:expr) => {
        impl $ty {
            /// Allocates an iterator retaining `dict`.
            pub(crate) fn allocate(dict: HeapId, expected_len: usize, vm: &mut VM<'_>) -> Value {
                let id = vm.heap.allocate($heap_variant(Self(DictIteratorState {
                    dict,
                    index: 0,
                    expected_len,
                    exhausted: false,
                })));
                vm.heap.inc_ref(dict);
                Value::Ref(id)
            }

            /// Returns the retained dictionary id for GC tracing.
            pub(crate) fn source_id(&self) -> HeapId {
                self.0.dict
            }

            /// Returns the captured number of entries not yet yielded.
            pub(crate) fn size_hint(&self) -> usize {
                self.0.size_hint()
            }
        }

        impl HeapItem for $ty {
            fn py_dec_ref_ids(&mut self, stack: &mut Vec<HeapId>) {
                stack.push(self.source_id());
            }
        }

        impl<'h> PyTrait<'h> for HeapObjectRead<'h, $ty> {
            fn py_is_iterable(&self, _: &VM<'h>) -> bool {
                true
            }

            fn py_type(&self, _: &VM<'h>) -> Type {
                $python_type
            }

            fn py_len(&self, _: &VM<'h>) -> Option<usize> {
                None
            }

            fn py_eq_impl(&self, _: &Value, _: &mut VM<'h>) -> RunResult<Option<bool>> {
                Ok(None)
            }

            fn py_iter(&self, vm: &mut VM<'h>) -> RunResult<Value> {
                Ok(self.clone_value(vm.heap))
            }

            fn py_next(&mut self, vm: &mut VM<'h>) -> RunResult<Option<Value>> {
                $next(self, vm)
            }
        }
    };
}

impl_dict_iterator!(
    DictKeyIterator,
    Type::DictKeyIterator,
    HeapData::DictKeyIterator,
    |this: &mut HeapRead<'h, DictKeyIterator>, vm: &mut VM<'h>| {
        let (dict_id, current_len) = {
            let dict_id = this.get(vm.heap).source_id();
            let HeapData::Dict(dict) = vm.heap.get(dict_id) else {
                unreachable!("dict iterator must retain a dict")
            };
            (dict_id, dict.len())
        };
        let Some(index) = this.get_mut(vm.heap).0.next_index(current_len)? else {
            return Ok(None);
        };
        let HeapData::Dict(dict) = vm.heap.get(dict_id) else {
            unreachable!("dict iterator must retain a dict")
        };
        Ok(Some(
            dict.key_at(index)
                .expect("index should be valid")
                .clone_with_heap(vm.heap),
        ))
    }
);

impl_dict_iterator!(
    DictItemIterator,
    Type::DictItemIterator,
    HeapData::DictItemIterator,
    |this: &mut HeapRead<'h, DictItemIterator>, vm: &mut VM<'h>| {
        let (dict_id, current_len) = {
            let dict_id = this.get(vm.heap).source_id();
            let HeapData::Dict(dict) = vm.heap.get(dict_id) else {
                unreachable!("dict iterator must retain a dict")
            };
            (dict_id, dict.len())
        };
        let Some(index) = this.get_mut(vm.heap).0.next_index(current_len)? else {
            return Ok(None);
        };
        let HeapData::Dict(dict) = vm.heap.get(dict_id) else {
            unreachable!("dict iterator must retain a dict")
        };
        let (key, value) = dict.item_at(index).expect("index should be valid");
        Ok(Some(allocate_tuple(
            smallvec![key.clone_with_heap(vm.heap), value.clone_with_heap(vm.heap)],
            vm.heap,
        )))
    }
);

impl_dict_iterator!(
    DictValueIterator,
    Type::DictValueIterator,
    HeapData::DictValueIterator,
    |this: &mut HeapRead<'h, DictValueIterator>, vm: &mut VM<'h>| {
        let (dict_id, current_len) = {
            let dict_id = this.get(vm.heap).source_id();
            let HeapData::Dict(dict) = vm.heap.get(dict_id) else {
                unreachable!("dict iterator must retain a dict")
            };
            (dict_id, dict.len())
        };
        let Some(index) = this.get_mut(vm.heap).0.next_index(current_len)? else {
            return Ok(None);
        };
        let HeapData::Dict(dict) = vm.heap.get(dict_id) else {
            unreachable!("dict iterator must retain a dict")
        };
        Ok(Some(
            dict.value_at(index)
                .expect("index should be valid")
                .clone_with_heap(vm.heap),
        ))
    }
);
