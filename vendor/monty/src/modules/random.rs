//! rlm patch: the `random` module.
//!
//! CPython's generator (MT19937, seeded by `init_by_array`) and CPython's
//! algorithms on top of it (`_randbelow` by rejection on `getrandbits`,
//! `sample`'s two strategies, `choices`' bisection, `gauss`' pair caching),
//! so `random.seed(n)` followed by any of the functions below gives the same
//! numbers as CPython 3.11+ for an `int` seed. A `str`/`bytes` seed is
//! reproducible but gives a different sequence than CPython (which hashes it
//! with SHA-512). Without `seed()` the generator is seeded from the OS.
//!
//! The state is per interpreter ([`crate::heap::Heap::module_state`]); the
//! `random.Random` class, `getstate`/`setstate` and the other distributions
//! are not provided.

use crate::{
    args::{ArgValues, FromArgs},
    bytecode::VM,
    defer_drop,
    exception_private::{ExcType, RunError, RunResult, SimpleException},
    heap::{HeapData, HeapId, HeapReadOutput},
    intern::StaticStrings,
    modules::ModuleFunctions,
    types::{List, LongInt, Module, PyTrait},
    value::Value,
};

const N: usize = 624;
const M: usize = 397;

/// The Mersenne Twister state of one interpreter, plus `gauss`' spare value.
#[derive(Debug, Clone)]
pub(crate) struct MersenneTwister {
    mt: Box<[u32; N]>,
    index: usize,
    gauss_next: Option<f64>,
}

impl MersenneTwister {
    /// CPython's `init_by_array(key)` (random_seed with an int seed).
    pub(crate) fn from_key(key: &[u32]) -> Self {
        let mut mt = Box::new([0u32; N]);
        mt[0] = 19_650_218;
        for i in 1..N {
            mt[i] = 1_812_433_253u32
                .wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30))
                .wrapping_add(i as u32);
        }
        let key: &[u32] = if key.is_empty() { &[0] } else { key };
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..N.max(key.len()) {
            let prev = mt[i - 1] ^ (mt[i - 1] >> 30);
            mt[i] = (mt[i] ^ prev.wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..N - 1 {
            let prev = mt[i - 1] ^ (mt[i - 1] >> 30);
            mt[i] = (mt[i] ^ prev.wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
        }
        mt[0] = 0x8000_0000;
        Self {
            mt,
            index: N,
            gauss_next: None,
        }
    }

    /// `seed(n)` for an int: the 32-bit words of `abs(n)`, least significant first.
    pub(crate) fn from_u128(seed: u128) -> Self {
        let mut key = Vec::new();
        let mut rest = seed;
        while rest != 0 {
            key.push(rest as u32);
            rest >>= 32;
        }
        Self::from_key(&key)
    }

    /// Seeded from the operating system's entropy (CPython: `seed(None)`).
    fn from_os() -> Self {
        let mut bytes = [0u8; 32];
        if getrandom::fill(&mut bytes).is_err() {
            // No entropy source: the clock still makes runs differ.
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            bytes[..16].copy_from_slice(&nanos.to_le_bytes());
        }
        let key: Vec<u32> = bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Self::from_key(&key)
    }

    /// `genrand_uint32`.
    pub(crate) fn next_u32(&mut self) -> u32 {
        if self.index >= N {
            for k in 0..N {
                let y = (self.mt[k] & 0x8000_0000) | (self.mt[(k + 1) % N] & 0x7fff_ffff);
                let mut v = self.mt[(k + M) % N] ^ (y >> 1);
                if y & 1 != 0 {
                    v ^= 0x9908_b0df;
                }
                self.mt[k] = v;
            }
            self.index = 0;
        }
        let mut y = self.mt[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^= y >> 18;
        y
    }

    /// `random()`: 53 random bits in [0, 1).
    pub(crate) fn random(&mut self) -> f64 {
        let a = self.next_u32() >> 5;
        let b = self.next_u32() >> 6;
        (f64::from(a) * 67_108_864.0 + f64::from(b)) * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `getrandbits(k)` for `k <= 64`.
    pub(crate) fn getrandbits(&mut self, k: u32) -> u64 {
        if k == 0 {
            return 0;
        }
        if k <= 32 {
            return u64::from(self.next_u32() >> (32 - k));
        }
        // Words least significant first; the last one keeps its top bits.
        let low = u64::from(self.next_u32());
        let high = u64::from(self.next_u32() >> (64 - k));
        low | (high << 32)
    }

    /// `_randbelow(n)`: uniform in [0, n) by rejection (`n` > 0).
    pub(crate) fn randbelow(&mut self, n: u64) -> u64 {
        let k = 64 - n.leading_zeros();
        loop {
            let r = self.getrandbits(k);
            if r < n {
                return r;
            }
        }
    }
}

/// Per-interpreter state of the modules the rlm patch adds.
#[derive(Debug)]
pub(crate) struct ModuleState {
    /// The `random` generator, seeded from the OS on first use.
    pub(crate) random: Option<MersenneTwister>,
    /// `csv.field_size_limit()`.
    pub(crate) csv_field_limit: i64,
}

impl Default for ModuleState {
    fn default() -> Self {
        Self {
            random: None,
            csv_field_limit: 128 * 1024,
        }
    }
}

/// `random` module functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::Display, serde::Serialize, serde::Deserialize)]
#[strum(serialize_all = "lowercase")]
pub(crate) enum RandomFunctions {
    Seed,
    Random,
    Uniform,
    Randint,
    Randrange,
    Choice,
    Choices,
    Shuffle,
    Sample,
    Gauss,
    Getrandbits,
}

const FUNCTIONS: &[(StaticStrings, RandomFunctions)] = &[
    (StaticStrings::Seed, RandomFunctions::Seed),
    (StaticStrings::Random, RandomFunctions::Random),
    (StaticStrings::Uniform, RandomFunctions::Uniform),
    (StaticStrings::Randint, RandomFunctions::Randint),
    (StaticStrings::Randrange, RandomFunctions::Randrange),
    (StaticStrings::Choice, RandomFunctions::Choice),
    (StaticStrings::Choices, RandomFunctions::Choices),
    (StaticStrings::Shuffle, RandomFunctions::Shuffle),
    (StaticStrings::Sample, RandomFunctions::Sample),
    (StaticStrings::Gauss, RandomFunctions::Gauss),
    (StaticStrings::Getrandbits, RandomFunctions::Getrandbits),
];

/// Creates the `random` module on the heap.
pub fn create_module(vm: &mut VM<'_>) -> HeapId {
    let mut module = Module::new(StaticStrings::Random);
    for (name, func) in FUNCTIONS {
        module.set_attr(*name, Value::ModuleFunction(ModuleFunctions::Random(*func)), vm);
    }
    vm.heap.allocate(HeapData::Module(Box::new(module)))
}

/// The interpreter's generator (seeded from the OS the first time).
fn rng<'a>(vm: &'a mut VM<'_>) -> &'a mut MersenneTwister {
    vm.heap
        .module_state
        .random
        .get_or_insert_with(MersenneTwister::from_os)
}

/// Dispatches a call to a `random` module function.
pub(super) fn call(vm: &mut VM<'_>, function: RandomFunctions, args: ArgValues) -> RunResult<Value> {
    match function {
        RandomFunctions::Seed => seed(vm, args),
        RandomFunctions::Random => {
            args.check_zero_args("random", vm.heap)?;
            Ok(Value::Float(rng(vm).random()))
        }
        RandomFunctions::Uniform => {
            let (a, b) = args.get_two_args("uniform", vm.heap)?;
            defer_drop!(a, vm);
            defer_drop!(b, vm);
            let (a, b) = (float_arg(a, vm)?, float_arg(b, vm)?);
            Ok(Value::Float(a + (b - a) * rng(vm).random()))
        }
        RandomFunctions::Randint => {
            let (a, b) = args.get_two_args("randint", vm.heap)?;
            defer_drop!(a, vm);
            defer_drop!(b, vm);
            let (a, b) = (int_arg(a, vm)?, int_arg(b, vm)?);
            randrange(vm, a, Some(b.saturating_add(1)), 1)
        }
        RandomFunctions::Randrange => {
            let RandrangeArgs { start, stop, step } = RandrangeArgs::from_args(args, vm)?;
            defer_drop!(start, vm);
            defer_drop!(stop, vm);
            defer_drop!(step, vm);
            let start = int_arg(start, vm)?;
            let stop = if matches!(stop, Value::None) {
                None
            } else {
                Some(int_arg(stop, vm)?)
            };
            let step = int_arg(step, vm)?;
            if stop.is_none() && step != 1 {
                return Err(SimpleException::new_msg(ExcType::TypeError, "Missing a non-None stop argument").into());
            }
            randrange(vm, start, stop, step)
        }
        RandomFunctions::Choice => {
            let seq = args.get_one_arg("choice", vm.heap)?;
            defer_drop!(seq, vm);
            let n = sequence_len(seq, vm)?;
            if n == 0 {
                return Err(SimpleException::new_msg(ExcType::IndexError, "Cannot choose from an empty sequence").into());
            }
            let j = rng(vm).randbelow(n as u64);
            item_at(seq, j, vm)
        }
        RandomFunctions::Choices => choices(vm, args),
        RandomFunctions::Shuffle => shuffle(vm, args),
        RandomFunctions::Sample => sample(vm, args),
        RandomFunctions::Gauss => {
            let GaussArgs { mu, sigma } = GaussArgs::from_args(args, vm)?;
            defer_drop!(mu, vm);
            defer_drop!(sigma, vm);
            let (mu, sigma) = (float_arg(mu, vm)?, float_arg(sigma, vm)?);
            let r = rng(vm);
            let z = if let Some(z) = r.gauss_next.take() {
                z
            } else {
                let x2pi = r.random() * std::f64::consts::TAU;
                let g2rad = (-2.0 * (1.0 - r.random()).ln()).sqrt();
                r.gauss_next = Some(x2pi.sin() * g2rad);
                x2pi.cos() * g2rad
            };
            Ok(Value::Float(mu + z * sigma))
        }
        RandomFunctions::Getrandbits => {
            let k = args.get_one_arg("getrandbits", vm.heap)?;
            defer_drop!(k, vm);
            let k = int_arg(k, vm)?;
            if k < 0 {
                return Err(value_error("number of bits must be non-negative"));
            }
            if k > 64 {
                return Err(value_error(
                    "getrandbits() of more than 64 bits is not supported in this sandbox",
                ));
            }
            let bits = rng(vm).getrandbits(k as u32);
            Ok(match i64::try_from(bits) {
                Ok(v) => Value::Int(v),
                Err(_) => LongInt::value_from_u128(u128::from(bits), vm.heap),
            })
        }
    }
}

#[derive(FromArgs)]
#[from_args(name = "seed", style = def)]
struct SeedArgs {
    #[from_args(default = Value::None)]
    a: Value,
    #[from_args(default = Value::Int(2))]
    version: Value,
}

/// `random.seed(a=None)`.
fn seed(vm: &mut VM<'_>, args: ArgValues) -> RunResult<Value> {
    let SeedArgs { a, version } = SeedArgs::from_args(args, vm)?;
    defer_drop!(a, vm);
    defer_drop!(version, vm);
    let state = match a {
        Value::None => MersenneTwister::from_os(),
        Value::Int(i) => MersenneTwister::from_u128(u128::from(i.unsigned_abs())),
        Value::Bool(b) => MersenneTwister::from_u128(u128::from(*b)),
        _ => {
            if let Some(HeapReadOutput::LongInt(big)) = a.read_heap(vm) {
                let (_, words) = big.get(vm.heap).inner().to_u32_digits();
                MersenneTwister::from_key(&words)
            } else if let Ok(text) = a.to_str(vm) {
                MersenneTwister::from_key(&fnv_words(text.as_bytes()))
            } else if let Some(HeapReadOutput::Bytes(b)) = a.read_heap(vm) {
                MersenneTwister::from_key(&fnv_words(b.get(vm.heap).as_slice()))
            } else {
                let msg = format!(
                    "The only supported seed types are: None, int, str and bytes (got {})",
                    a.py_type_name(vm)
                );
                return Err(SimpleException::new_msg(ExcType::TypeError, msg).into());
            }
        }
    };
    vm.heap.module_state.random = Some(state);
    Ok(Value::None)
}

/// A reproducible key for a str/bytes seed (FNV-1a, two rounds).
fn fnv_words(bytes: &[u8]) -> Vec<u32> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    vec![h as u32, (h >> 32) as u32, bytes.len() as u32]
}

#[derive(FromArgs)]
#[from_args(name = "randrange", style = def)]
struct RandrangeArgs {
    start: Value,
    #[from_args(default = Value::None)]
    stop: Value,
    #[from_args(default = Value::Int(1))]
    step: Value,
}

/// CPython's `randrange(start, stop, step)` for ints.
fn randrange(vm: &mut VM<'_>, start: i64, stop: Option<i64>, step: i64) -> RunResult<Value> {
    let Some(stop) = stop else {
        if start > 0 {
            return Ok(Value::Int(rng(vm).randbelow(start as u64) as i64));
        }
        return Err(value_error("empty range for randrange()"));
    };
    let width = i128::from(stop) - i128::from(start);
    let n = if step == 1 {
        if width <= 0 {
            return Err(value_error(format!(
                "empty range for randrange() ({start}, {stop}, {width})"
            )));
        }
        width
    } else if step > 0 {
        (width + i128::from(step) - 1).div_euclid(i128::from(step))
    } else if step < 0 {
        (width + i128::from(step) + 1).div_euclid(i128::from(step))
    } else {
        return Err(value_error("zero step for randrange()"));
    };
    if n <= 0 {
        return Err(value_error("empty range for randrange()"));
    }
    let Ok(n) = u64::try_from(n) else {
        return Err(value_error("randrange() range is too large for this sandbox"));
    };
    let r = i128::from(rng(vm).randbelow(n));
    let v = i128::from(start) + i128::from(step) * r;
    Ok(i64::try_from(v).map_or_else(|_| LongInt::value_from_u128(v as u128, vm.heap), Value::Int))
}

#[derive(FromArgs)]
#[from_args(name = "choices", style = def)]
struct ChoicesArgs {
    population: Value,
    #[from_args(default = Value::None)]
    weights: Value,
    #[from_args(kw_only, default = Value::None)]
    cum_weights: Value,
    #[from_args(kw_only, default = Value::Int(1))]
    k: Value,
}

/// `random.choices(population, weights=None, *, cum_weights=None, k=1)`.
fn choices(vm: &mut VM<'_>, args: ArgValues) -> RunResult<Value> {
    let ChoicesArgs {
        population,
        weights,
        cum_weights,
        k,
    } = ChoicesArgs::from_args(args, vm)?;
    defer_drop!(population, vm);
    defer_drop!(weights, vm);
    defer_drop!(cum_weights, vm);
    defer_drop!(k, vm);
    let n = sequence_len(population, vm)?;
    let k = int_arg(k, vm)?.max(0) as usize;
    reserve_picks(k, vm)?;
    let cumulative: Option<Vec<f64>> = match (weights, cum_weights) {
        (Value::None, Value::None) => None,
        (w, Value::None) => {
            let mut total = 0.0;
            let mut out = Vec::new();
            for v in number_list(w, vm)? {
                total += v;
                out.push(total);
            }
            Some(out)
        }
        (Value::None, c) => Some(number_list(c, vm)?),
        _ => {
            return Err(SimpleException::new_msg(
                ExcType::TypeError,
                "Cannot specify both weights and cumulative weights",
            )
            .into());
        }
    };
    let mut picks = Vec::with_capacity(k);
    match cumulative {
        None => {
            if n == 0 && k > 0 {
                return Err(SimpleException::new_msg(ExcType::IndexError, "list index out of range").into());
            }
            for i in 0..k {
                tick(i, vm)?;
                picks.push((rng(vm).random() * n as f64).floor() as usize);
            }
        }
        Some(cum) => {
            if cum.len() != n {
                return Err(value_error("The number of weights does not match the population"));
            }
            let Some(&total) = cum.last() else {
                return Err(SimpleException::new_msg(ExcType::IndexError, "list index out of range").into());
            };
            if total <= 0.0 {
                return Err(value_error("Total of weights must be greater than zero"));
            }
            if !total.is_finite() {
                return Err(value_error("Total of weights must be finite"));
            }
            let hi = n - 1;
            for i in 0..k {
                tick(i, vm)?;
                let x = rng(vm).random() * total;
                // bisect_right(cum, x, 0, hi)
                let i = cum[..hi].partition_point(|c| *c <= x);
                picks.push(i);
            }
        }
    }
    let mut items = Vec::with_capacity(k);
    for j in picks {
        match item_at(population, j as u64, vm) {
            Ok(v) => items.push(v),
            Err(e) => {
                for v in items {
                    v.drop_with(vm);
                }
                return Err(e);
            }
        }
    }
    Ok(Value::Ref(vm.heap.allocate(HeapData::List(List::new(items)))))
}

/// `random.shuffle(x)`: in place, CPython's swaps.
fn shuffle(vm: &mut VM<'_>, args: ArgValues) -> RunResult<Value> {
    let x = args.get_one_arg("shuffle", vm.heap)?;
    defer_drop!(x, vm);
    let len = match x.read_heap(vm) {
        Some(HeapReadOutput::List(list)) => list.get(vm.heap).len(),
        _ => {
            let msg = format!(
                "random.shuffle() needs a list here, not '{}' (sandbox: shuffle a list, e.g. xs = list(xs))",
                x.py_type_name(vm)
            );
            return Err(SimpleException::new_msg(ExcType::TypeError, msg).into());
        }
    };
    let mut swaps = Vec::with_capacity(len.saturating_sub(1));
    for i in (1..len).rev() {
        let j = rng(vm).randbelow(i as u64 + 1) as usize;
        swaps.push((i, j));
    }
    if let Some(HeapReadOutput::List(mut list)) = x.read_heap(vm) {
        let items = list.get_mut(vm.heap).as_vec_mut();
        for (i, j) in swaps {
            items.swap(i, j);
        }
    }
    Ok(Value::None)
}

#[derive(FromArgs)]
#[from_args(name = "sample", style = def)]
struct SampleArgs {
    population: Value,
    k: Value,
}

/// `random.sample(population, k)`: CPython's pool or set strategy.
fn sample(vm: &mut VM<'_>, args: ArgValues) -> RunResult<Value> {
    let SampleArgs { population, k } = SampleArgs::from_args(args, vm)?;
    defer_drop!(population, vm);
    defer_drop!(k, vm);
    if matches!(
        population.read_heap(vm),
        Some(HeapReadOutput::Set(_) | HeapReadOutput::FrozenSet(_) | HeapReadOutput::Dict(_))
    ) {
        return Err(SimpleException::new_msg(
            ExcType::TypeError,
            "Population must be a sequence.  For dicts or sets, use sorted(d).",
        )
        .into());
    }
    let n = sequence_len(population, vm)?;
    let k = int_arg(k, vm)?;
    if k < 0 || k as usize > n {
        return Err(value_error("Sample larger than population or is negative"));
    }
    let k = k as usize;
    reserve_picks(k, vm)?;
    let mut setsize = 21usize;
    if k > 5 {
        let exponent = ((k as f64 * 3.0).ln() / 4f64.ln()).ceil();
        setsize += 4usize.saturating_pow(exponent as u32);
    }
    let mut picks = Vec::with_capacity(k);
    if n <= setsize {
        let mut pool: Vec<usize> = (0..n).collect();
        for i in 0..k {
            tick(i, vm)?;
            let j = rng(vm).randbelow((n - i) as u64) as usize;
            picks.push(pool[j]);
            pool[j] = pool[n - i - 1];
        }
    } else {
        let mut selected = std::collections::HashSet::with_capacity(k);
        for i in 0..k {
            tick(i, vm)?;
            let mut j = rng(vm).randbelow(n as u64) as usize;
            while selected.contains(&j) {
                j = rng(vm).randbelow(n as u64) as usize;
            }
            selected.insert(j);
            picks.push(j);
        }
    }
    let mut items = Vec::with_capacity(k);
    for j in picks {
        match item_at(population, j as u64, vm) {
            Ok(v) => items.push(v),
            Err(e) => {
                for v in items {
                    v.drop_with(vm);
                }
                return Err(e);
            }
        }
    }
    Ok(Value::Ref(vm.heap.allocate(HeapData::List(List::new(items)))))
}

#[derive(FromArgs)]
#[from_args(name = "gauss", style = def)]
struct GaussArgs {
    #[from_args(default = Value::Float(0.0))]
    mu: Value,
    #[from_args(default = Value::Float(1.0))]
    sigma: Value,
}

/// Checks that `k` picks (an index, then a value each) fit the memory limit
/// before any is made.
fn reserve_picks(k: usize, vm: &mut VM<'_>) -> RunResult<()> {
    vm.heap
        .tracker
        .check_allocation(k.saturating_mul(std::mem::size_of::<usize>() + crate::value::VALUE_SIZE))?;
    Ok(())
}

/// The cell's time limit, checked every 65,536 steps of a long loop.
fn tick(i: usize, vm: &mut VM<'_>) -> RunResult<()> {
    if i % 65_536 == 65_535 {
        vm.heap.tracker.check_time()?;
    }
    Ok(())
}

fn value_error(message: impl Into<String>) -> RunError {
    SimpleException::new_msg(ExcType::ValueError, message.into()).into()
}

/// An int argument (bool counts, as in CPython).
fn int_arg(v: &Value, vm: &mut VM<'_>) -> RunResult<i64> {
    match v {
        Value::Int(i) => Ok(*i),
        Value::Bool(b) => Ok(i64::from(*b)),
        _ => {
            let msg = format!("'{}' object cannot be interpreted as an integer", v.py_type_name(vm));
            Err(SimpleException::new_msg(ExcType::TypeError, msg).into())
        }
    }
}

/// A real-number argument.
fn float_arg(v: &Value, vm: &mut VM<'_>) -> RunResult<f64> {
    match v {
        Value::Int(i) => Ok(*i as f64),
        Value::Float(f) => Ok(*f),
        Value::Bool(b) => Ok(f64::from(u8::from(*b))),
        _ => {
            let msg = format!("must be real number, not {}", v.py_type_name(vm));
            Err(SimpleException::new_msg(ExcType::TypeError, msg).into())
        }
    }
}

/// The numbers of an iterable of weights.
fn number_list(v: &Value, vm: &mut VM<'_>) -> RunResult<Vec<f64>> {
    let items = crate::types::iter::collect_iterable(v, vm)?;
    let mut out = Vec::with_capacity(items.len());
    let mut err = None;
    for item in &items {
        if err.is_none() {
            match float_arg(item, vm) {
                Ok(f) => out.push(f),
                Err(e) => err = Some(e),
            }
        }
    }
    for item in items {
        item.drop_with(vm);
    }
    match err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// `len(seq)` of a sequence argument.
fn sequence_len(seq: &Value, vm: &mut VM<'_>) -> RunResult<usize> {
    seq.py_len(vm).ok_or_else(|| {
        let msg = format!("object of type '{}' has no len()", seq.py_type_name(vm));
        SimpleException::new_msg(ExcType::TypeError, msg).into()
    })
}

/// `seq[j]`.
fn item_at(seq: &Value, j: u64, vm: &mut VM<'_>) -> RunResult<Value> {
    seq.py_getitem(&Value::Int(j as i64), vm)
}
