//! numpy's text of a floating-point value, for every float type it has a scalar of (float16,
//! float32, float64 and the x87 80-bit longdouble): the shortest digits that identify the value
//! among its own type's neighbours, as numpy's Dragon4 (`numpy/_core/src/multiarray/dragon4.c`,
//! "unique" mode: Burger & Dybvig's free-format digits with IEEE round-to-even boundaries), and
//! the choice between positional and scientific notation that `<type>type_repr` makes in
//! `scalartypes.c.src` (from the value, not from its digits: `np.float32(1e-4)` is
//! `np.float32(1e-04)`, since that float32 is just below 1e-4).
//!
//! Digits come from exact big-integer arithmetic, so no value is printed approximately.

use std::cmp::Ordering;

/// A float type's value, decoded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Float {
    Nan,
    Inf {
        neg: bool,
    },
    /// `mant * 2^exp`; `unequal`: the value is a power of two above the smallest normal, whose
    /// neighbour below is half as far as the one above.
    Finite {
        neg: bool,
        mant: u128,
        exp: i32,
        unequal: bool,
    },
}

impl Float {
    /// An IEEE 754 binary value of `frac` fraction bits and `expo` exponent bits (float16:
    /// 10/5, float32: 23/8, float64: 52/11).
    pub fn ieee(bits: u128, frac: u32, expo: u32) -> Float {
        let neg = bits >> (frac + expo) & 1 == 1;
        let e = (bits >> frac) as u32 & ((1 << expo) - 1);
        let f = bits & ((1u128 << frac) - 1);
        let bias = (1i32 << (expo - 1)) - 1;
        if e == (1 << expo) - 1 {
            return if f == 0 {
                Float::Inf { neg }
            } else {
                Float::Nan
            };
        }
        if e == 0 {
            // Zero and subnormals: no hidden bit, the smallest normal's exponent.
            return Float::Finite {
                neg,
                mant: f,
                exp: 1 - bias - frac as i32,
                unequal: false,
            };
        }
        Float::Finite {
            neg,
            mant: f | 1u128 << frac,
            exp: e as i32 - bias - frac as i32,
            unequal: f == 0 && e != 1,
        }
    }

    /// The x87 80-bit extended value in the first 10 bytes of a `long double` (x86-64's;
    /// little-endian: 64-bit significand with its integer bit explicit, then sign and 15-bit
    /// exponent). None for the encodings the FPU itself refuses (pseudo-NaN, pseudo-infinity,
    /// unnormal, pseudo-denormal), whose text numpy's Dragon4 does not define.
    pub fn x87(b: &[u8; 10]) -> Option<Float> {
        let sig = u64::from_le_bytes(b[..8].try_into().ok()?);
        let top = u16::from_le_bytes([b[8], b[9]]);
        let neg = top >> 15 == 1;
        let e = (top & 0x7fff) as i32;
        let int_bit = sig >> 63 == 1;
        if e == 0x7fff {
            return match (int_bit, sig << 1 == 0) {
                (true, true) => Some(Float::Inf { neg }),
                (true, false) => Some(Float::Nan),
                (false, _) => None,
            };
        }
        if e == 0 {
            return (!int_bit).then_some(Float::Finite {
                neg,
                mant: sig as u128,
                exp: 1 - 16383 - 63,
                unequal: false,
            });
        }
        int_bit.then_some(Float::Finite {
            neg,
            mant: sig as u128,
            exp: e - 16383 - 63,
            unequal: sig << 1 == 0 && e != 1,
        })
    }
}

/// How a positional number keeps its trailing zeros (numpy's `TrimMode`): `1.0` (LeaveOneZero,
/// a real float's repr) or `1` (DptZeros, a complex's parts and every scientific mantissa).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trim {
    LeaveOneZero,
    DptZeros,
}

/// numpy's `<type>type_repr_either`: the value's text, positional when it is zero, nan, or
/// `1e-4 <= |x| < max_positional` (`at_least_1e4` says whether |x| reaches 1e-4 as numpy
/// compares it for this type), scientific otherwise; `plus` puts `+` before a positive value
/// (a complex's imaginary part). nan is `nan` whatever its sign, as Dragon4 prints it.
pub fn either(x: Float, max_positional: u64, trim: Trim, plus: bool) -> String {
    let sign = |neg: bool| match (neg, plus) {
        (true, _) => "-",
        (false, true) => "+",
        (false, false) => "",
    };
    match x {
        Float::Nan => format!("{}nan", sign(false)),
        Float::Inf { neg } => format!("{}inf", sign(neg)),
        Float::Finite { neg, mant: 0, .. } => layout(sign(neg), "0", 0, true, trim),
        Float::Finite {
            neg,
            mant,
            exp,
            unequal,
        } => {
            let (digits, exp10) = shortest(mant, exp, unequal);
            let positional = at_least_1e4(mant, exp) && below(mant, exp, max_positional);
            layout(sign(neg), &digits, exp10, positional, trim)
        }
    }
}

/// `mant * 2^exp >= 1e-4`, compared exactly. numpy compares with `1.e-4` (a double, float16)
/// or `1.e-4L` (x87, the other types); both lie above 1/10000 (by 4.8e-21 and 1.1e-24), and
/// no float16/32/64 or x87 value lies between 1/10000 and them, the double and the long double
/// being the nearest of their types: so the exact comparison is numpy's for every type.
fn at_least_1e4(mant: u128, exp: i32) -> bool {
    let (mut num, den) = ratio(mant, exp);
    num.mul_pow10(4);
    num.cmp(&den) != Ordering::Less
}

/// `mant * 2^exp < limit`.
fn below(mant: u128, exp: i32, limit: u64) -> bool {
    let (num, den) = ratio(mant, exp);
    let mut l = den;
    l.mul_small_u128(limit as u128);
    num.cmp(&l) == Ordering::Less
}

/// The value as a fraction of big integers.
fn ratio(mant: u128, exp: i32) -> (Big, Big) {
    let mut num = Big::from(mant);
    let mut den = Big::from(1);
    if exp >= 0 {
        num.shl(exp as u32);
    } else {
        den.shl((-exp) as u32);
    }
    (num, den)
}

/// The shortest digits that identify `mant * 2^exp` (nonzero) among the values of its type,
/// nearest the value where several are as short, and the decimal exponent of the first one:
/// `("15", 0)` for 1.5, `("6", -8)` for float16's 6e-08.
pub fn shortest(mant: u128, exp: i32, unequal: bool) -> (String, i32) {
    // value = r/s; the gaps to the neighbours above and below, halved: m_plus/s, m_minus/s.
    // Everything is scaled by 4 (by 2 more where the lower gap is half the upper one) so
    // that the half-gaps are whole.
    let (mut r, mut s, mut m_plus, mut m_minus) = if exp >= 0 {
        let mut r = Big::from(mant);
        r.shl(exp as u32 + 2);
        let mut mp = Big::from(2);
        mp.shl(exp as u32);
        let mut mm = Big::from(if unequal { 1 } else { 2 });
        mm.shl(exp as u32);
        (r, Big::from(4), mp, mm)
    } else {
        let mut s = Big::from(4);
        s.shl((-exp) as u32);
        (
            Big::from(mant << 2),
            s,
            Big::from(2),
            Big::from(if unequal { 1 } else { 2 }),
        )
    };
    let even = mant & 1 == 0;
    // k with 10^(k-1) <= value < 10^k: a float estimate, then exact corrections.
    let log2 = (mant as f64).log2() + exp as f64;
    let mut k = (log2 * std::f64::consts::LOG10_2).ceil() as i32;
    if k >= 0 {
        s.mul_pow10(k as u32);
    } else {
        for b in [&mut r, &mut m_plus, &mut m_minus] {
            b.mul_pow10((-k) as u32);
        }
    }
    while r.cmp(&s) != Ordering::Less {
        s.mul_small(10);
        k += 1;
    }
    loop {
        let mut r10 = r.clone();
        r10.mul_small(10);
        if r10.cmp(&s) != Ordering::Less {
            break;
        }
        r = r10;
        m_plus.mul_small(10);
        m_minus.mul_small(10);
        k -= 1;
    }
    let mut digits = Vec::new();
    let (last, low, high) = loop {
        r.mul_small(10);
        m_plus.mul_small(10);
        m_minus.mul_small(10);
        let d = r.div_digit(&s);
        let c = r.cmp(&m_minus);
        let low = if even {
            c != Ordering::Greater
        } else {
            c == Ordering::Less
        };
        let mut hi = r.clone();
        hi.add(&m_plus);
        let c = hi.cmp(&s);
        let high = if even {
            c != Ordering::Less
        } else {
            c == Ordering::Greater
        };
        if low || high || digits.len() > 64 {
            break (d, low, high);
        }
        digits.push(d);
    };
    let up = match (low, high) {
        (true, false) => false,
        (false, true) => true,
        _ => {
            r.shl(1);
            match r.cmp(&s) {
                Ordering::Less => false,
                Ordering::Greater => true,
                Ordering::Equal => last & 1 == 1,
            }
        }
    };
    digits.push(last);
    if up {
        // Carry through the nines; all nines become a 1 a place higher.
        while let Some(d) = digits.pop() {
            if d < 9 {
                digits.push(d + 1);
                break;
            }
        }
        if digits.is_empty() {
            digits.push(1);
            k += 1;
        }
    }
    let text = digits.iter().map(|d| char::from(b'0' + d)).collect();
    (text, k - 1)
}

/// `digits` (the first at 10^exp10) as numpy's Dragon4 lays them out: positional (`1.5`,
/// `0.0001`, `65500.0`) or scientific with a two-digit exponent at least (`6.55e+04`).
fn layout(sign: &str, digits: &str, exp10: i32, positional: bool, trim: Trim) -> String {
    let zero_point = || match trim {
        Trim::LeaveOneZero => ".0",
        Trim::DptZeros => "",
    };
    if !positional {
        let (first, rest) = digits.split_at(1);
        let point = if rest.is_empty() { "" } else { "." };
        let esign = if exp10 < 0 { '-' } else { '+' };
        return format!("{sign}{first}{point}{rest}e{esign}{:02}", exp10.abs());
    }
    let point = exp10 + 1;
    let n = digits.len() as i32;
    if point <= 0 {
        format!("{sign}0.{}{digits}", "0".repeat((-point) as usize))
    } else if point >= n {
        let zeros = "0".repeat((point - n) as usize);
        format!("{sign}{digits}{zeros}{}", zero_point())
    } else {
        let (int, frac) = digits.split_at(point as usize);
        format!("{sign}{int}.{frac}")
    }
}

/// An unsigned big integer, 32-bit limbs, least significant first, no leading zero limbs.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn from(v: u128) -> Big {
        let mut b = Big((0..4).map(|i| (v >> (32 * i)) as u32).collect());
        b.trim();
        b
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    fn shl(&mut self, bits: u32) {
        let (words, bits) = ((bits / 32) as usize, bits % 32);
        if bits > 0 {
            let mut carry = 0u32;
            for w in self.0.iter_mut() {
                let next = *w >> (32 - bits);
                *w = *w << bits | carry;
                carry = next;
            }
            self.0.push(carry);
        }
        self.0.splice(0..0, std::iter::repeat_n(0, words));
        self.trim();
    }

    fn mul_small(&mut self, m: u32) {
        let mut carry = 0u64;
        for w in self.0.iter_mut() {
            let v = *w as u64 * m as u64 + carry;
            *w = v as u32;
            carry = v >> 32;
        }
        self.0.push(carry as u32);
        self.trim();
    }

    fn mul_small_u128(&mut self, m: u128) {
        let parts = Big::from(m);
        let mut out = Big(Vec::new());
        for (i, &p) in parts.0.iter().enumerate() {
            let mut term = self.clone();
            term.mul_small(p);
            term.shl(32 * i as u32);
            out.add(&term);
        }
        *self = out;
    }

    fn mul_pow10(&mut self, n: u32) {
        for _ in 0..n / 9 {
            self.mul_small(1_000_000_000);
        }
        self.mul_small(10u32.pow(n % 9));
    }

    fn add(&mut self, o: &Big) {
        let mut carry = 0u64;
        let n = self.0.len().max(o.0.len());
        self.0.resize(n, 0);
        for i in 0..n {
            let v = self.0[i] as u64 + *o.0.get(i).unwrap_or(&0) as u64 + carry;
            self.0[i] = v as u32;
            carry = v >> 32;
        }
        self.0.push(carry as u32);
        self.trim();
    }

    /// `self -= o`, `o <= self`.
    fn sub(&mut self, o: &Big) {
        let mut borrow = 0i64;
        for i in 0..self.0.len() {
            let v = self.0[i] as i64 - *o.0.get(i).unwrap_or(&0) as i64 - borrow;
            self.0[i] = v.rem_euclid(1 << 32) as u32;
            borrow = (v < 0) as i64;
        }
        self.trim();
    }

    fn cmp(&self, o: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&o.0.len())
            .then_with(|| self.0.iter().rev().cmp(o.0.iter().rev()))
    }

    /// `self / s` for a quotient below 10 (the digit), leaving the remainder in `self`.
    fn div_digit(&mut self, s: &Big) -> u8 {
        let mut d = 0;
        while d < 9 && self.cmp(s) != Ordering::Less {
            self.sub(s);
            d += 1;
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f16(bits: u16) -> Float {
        Float::ieee(bits as u128, 10, 5)
    }
    fn f32_(x: f32) -> Float {
        Float::ieee(x.to_bits() as u128, 23, 8)
    }
    fn f64_(x: f64) -> Float {
        Float::ieee(x.to_bits() as u128, 52, 11)
    }
    fn repr(x: Float, max: u64) -> String {
        either(x, max, Trim::LeaveOneZero, false)
    }

    #[test]
    fn float16_shortest_digits_are_its_own() {
        // Values and texts from numpy 2.5.5's repr (np.float16(x)), max_positional 1e3.
        for (bits, want) in [
            (0x3e00, "1.5"),
            (0x2e66, "0.1"),
            (0x0001, "6e-08"),
            (0x03ff, "6.1e-05"),
            (0x7bff, "6.55e+04"),
            (0x63d0, "1e+03"),
            (0x63cf, "999.5"),
            (0x068d, "9.996e-05"),
            (0x068e, "0.0001"),
            (0x8000, "-0.0"),
            (0x7e00, "nan"),
            (0xfc00, "-inf"),
            (0x3c01, "1.001"),
        ] {
            assert_eq!(repr(f16(bits), 1000), want, "{bits:#x}");
        }
        // numpy 1.x and 2.0-2.2: positional up to 1e16.
        assert_eq!(repr(f16(0x7bff), 10u64.pow(16)), "65500.0");
    }

    #[test]
    fn float32_and_float64_digits_match_rusts_shortest_but_in_ties() {
        // Rust's `{:e}` prints shortest round-trip digits for f32 and f64 too: a check of the
        // big-integer path over many values, the boundaries of binades included. They differ
        // only where two shortest texts are as near the value, which numpy resolves to the
        // even last digit (312985.125f32, 0x4898d324: numpy's 312985.12, Rust's 312985.13).
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut ties = 0;
        for i in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = f64::from_bits(if i % 7 == 0 { x & !0xfff_ffff_ffff } else { x });
            let w = f32::from_bits(x as u32);
            for (f, rust, back) in [
                (f64_(v), format!("{:e}", v.abs()), v.is_finite() && v != 0.0),
                (f32_(w), format!("{:e}", w.abs()), w.is_finite() && w != 0.0),
            ] {
                let Float::Finite {
                    mant, exp, unequal, ..
                } = f
                else {
                    continue;
                };
                if !back {
                    continue;
                }
                let ours = sci(shortest(mant, exp, unequal));
                if ours != rust {
                    ties += 1;
                    assert_eq!(ours.len(), rust.len(), "{ours} {rust}");
                    let last = ours.split('e').next().unwrap().bytes().last().unwrap();
                    assert_eq!((last - b'0') % 2, 0, "{ours} {rust}");
                }
            }
        }
        assert!(ties < 100, "{ties}");
        let Float::Finite { mant, exp, .. } = f32_(f32::from_bits(0x4898_d324)) else {
            panic!()
        };
        assert_eq!(shortest(mant, exp, false), ("31298512".into(), 5));
    }

    fn sci((d, e): (String, i32)) -> String {
        let (a, b) = d.split_at(1);
        format!("{a}{}{b}e{e}", if b.is_empty() { "" } else { "." })
    }

    #[test]
    fn positional_or_scientific_is_decided_on_the_value() {
        // np.float32(1e-4) is just below 1e-4: scientific, though its digits read 1e-4.
        assert_eq!(repr(f32_(1e-4), 1_000_000), "1e-04");
        assert_eq!(repr(f64_(1e-4), 10u64.pow(16)), "0.0001");
        assert_eq!(repr(f32_(1e6), 1_000_000), "1e+06");
        assert_eq!(repr(f32_(999_999.9), 1_000_000), "999999.9");
        assert_eq!(repr(f64_(1e16), 10u64.pow(16)), "1e+16");
        assert_eq!(repr(f64_(1.2345e15), 10u64.pow(16)), "1234500000000000.0");
        assert_eq!(repr(f64_(5e-324), 10u64.pow(16)), "5e-324");
        assert_eq!(
            repr(f64_(f64::MAX), 10u64.pow(16)),
            "1.7976931348623157e+308"
        );
        assert_eq!(
            either(f64_(-1.5), 10u64.pow(16), Trim::DptZeros, true),
            "-1.5"
        );
        assert_eq!(either(f64_(2.0), 10u64.pow(16), Trim::DptZeros, true), "+2");
        assert_eq!(
            either(f64_(-0.0), 10u64.pow(16), Trim::DptZeros, false),
            "-0"
        );
    }

    #[test]
    fn x87_long_doubles() {
        let ld = |sig: u64, top: u16| {
            let mut b = [0u8; 10];
            b[..8].copy_from_slice(&sig.to_le_bytes());
            b[8..].copy_from_slice(&top.to_le_bytes());
            Float::x87(&b)
        };
        let e16 = 10u64.pow(16);
        // 1.5, 1/3 (rounded), 0.1, 1e-4L and its neighbour below, as numpy 2.5.5 prints them.
        let third = ld(0xaaaa_aaaa_aaaa_aaab, 0x3ffd).unwrap();
        for (x, want) in [
            (ld(0xc000_0000_0000_0000, 0x3fff).unwrap(), "1.5"),
            (third, "0.33333333333333333334"),
            (ld(0xcccc_cccc_cccc_cccd, 0x3ffb).unwrap(), "0.1"),
            (ld(0xd1b7_1758_e219_652c, 0x3ff1).unwrap(), "0.0001"),
            (
                ld(0xd1b7_1758_e219_652b, 0x3ff1).unwrap(),
                "9.9999999999999999995e-05",
            ),
            (ld(0x8000_0000_0000_0000, 0x7fff).unwrap(), "inf"),
            (ld(0xc000_0000_0000_0000, 0xffff).unwrap(), "nan"),
            (ld(1, 0).unwrap(), "4e-4951"),
        ] {
            assert_eq!(repr(x, e16), want);
        }
        // Unnormal, pseudo-infinity, pseudo-denormal: no text.
        assert_eq!(ld(0x4000_0000_0000_0000, 0x3fff), None);
        assert_eq!(ld(0, 0x7fff), None);
        assert_eq!(ld(0x8000_0000_0000_0000, 0), None);
    }

    #[test]
    fn big_integers() {
        let mut a = Big::from(u128::MAX);
        a.add(&Big::from(1));
        assert_eq!(a, {
            let mut b = Big::from(1);
            b.shl(128);
            b
        });
        a.sub(&Big::from(1));
        assert_eq!(a, Big::from(u128::MAX));
        let mut t = Big::from(7);
        t.mul_small_u128(1 << 100);
        let mut u = Big::from(7);
        u.shl(100);
        assert_eq!(t, u);
    }
}
