use super::{kept_units, refers_across_units, Bytes, Info, Sections};
use gimli::SectionId;

/// A DWARF 4 compilation unit whose root DIE (abbreviation 1) has one inline string.
fn unit(name: &str) -> Vec<u8> {
    let mut body = vec![4, 0, 0, 0, 0, 0, 8, 1]; // version, abbrev offset 0, address size, code
    body.extend(name.as_bytes());
    body.push(0);
    let mut out = (body.len() as u32).to_le_bytes().to_vec();
    out.extend(body);
    out
}

/// One .debug_aranges set: unit offset, (start, length) pairs.
fn aranges(unit: u32, ranges: &[(u64, u64)]) -> Vec<u8> {
    let mut body = vec![2, 0];
    body.extend(unit.to_le_bytes());
    body.extend([8, 0, 0, 0, 0, 0]); // address size, segment size, padding to 16
    for &(a, n) in ranges.iter().chain([(0, 0)].iter()) {
        body.extend(a.to_le_bytes());
        body.extend(n.to_le_bytes());
    }
    let mut out = (body.len() as u32).to_le_bytes().to_vec();
    out.extend(body);
    out
}

#[test]
fn only_the_units_covering_the_addresses_are_kept() {
    let (a, b) = (unit("a.c"), unit("b.c"));
    let info = [a.clone(), b.clone()].concat();
    let mut ar = aranges(0, &[(0x1000, 0x1000)]);
    ar.extend(aranges(a.len() as u32, &[(0x3000, 0x100), (0x5000, 0x10)]));
    // DW_TAG_compile_unit, no children, DW_AT_name/DW_FORM_string.
    let abbrev = vec![1, 0x11, 0, 0x03, 0x08, 0, 0, 0];
    let mut secs = Sections::new();
    secs.insert(SectionId::DebugInfo, Bytes::owned(info));
    secs.insert(SectionId::DebugAranges, Bytes::owned(ar));
    secs.insert(SectionId::DebugAbbrev, Bytes::owned(abbrev.clone()));

    let whole = |secs: &Sections| Info::Whole(secs.get(&SectionId::DebugInfo).cloned());
    let kept = |secs: &Sections, addrs: &[u64]| kept_units(secs, &mut whole(secs), addrs);
    let (kept_b, covered) = kept(&secs, &[0x3010, 0x5008]).expect("cut down");
    assert_eq!(&kept_b[..], &b[..]);
    assert_eq!(covered, vec![(0x3000, 0x3100), (0x5000, 0x5010)]);
    let (kept_ab, _) = kept(&secs, &[0x1fff, 0x3000]).expect("cut down");
    assert_eq!(&kept_ab[..], &[a.clone(), b.clone()].concat()[..]);
    // An address no unit covers, or just past a range: the whole DWARF.
    assert!(kept(&secs, &[0x2000]).is_none());
    assert!(kept(&secs, &[0x3100]).is_none());
    // A unit whose table has DW_FORM_ref_addr (DW_AT_abstract_origin): the whole DWARF.
    secs.insert(
        SectionId::DebugAbbrev,
        Bytes::owned(vec![1, 0x11, 0, 0x31, 0x10, 0, 0, 0]),
    );
    assert!(kept(&secs, &[0x3010]).is_none());
    // A unit offset past the section: the whole DWARF.
    let mut bad = aranges(0, &[(0x1000, 0x10)]);
    bad.extend(aranges(1 << 20, &[(0x3000, 0x10)]));
    secs.insert(SectionId::DebugAbbrev, Bytes::owned(abbrev));
    secs.insert(SectionId::DebugAranges, Bytes::owned(bad));
    assert!(kept(&secs, &[0x3000]).is_none());
}

#[test]
fn a_compressed_section_is_inflated_as_far_as_the_units_kept() {
    use std::io::Write;
    // A first unit of 600 KiB, then a small one: keeping the first inflates about its
    // length, keeping the second all of it; both give the bytes of the whole section.
    let (a, b) = (unit(&"a".repeat(600 << 10)), unit("b.c"));
    let info = [a.clone(), b.clone()].concat();
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(&info).unwrap();
    let packed = z.finish().unwrap();
    let data = object::CompressedData {
        format: object::CompressionFormat::Zlib,
        data: &packed,
        uncompressed_size: info.len() as u64,
    };
    let mut ar = aranges(0, &[(0x1000, 0x1000)]);
    ar.extend(aranges(a.len() as u32, &[(0x3000, 0x100)]));
    let mut secs = Sections::new();
    secs.insert(SectionId::DebugAranges, Bytes::owned(ar));
    secs.insert(
        SectionId::DebugAbbrev,
        Bytes::owned(vec![1, 0x11, 0, 0x03, 0x08, 0, 0, 0]),
    );

    let mut info_a = Info::inflating(&data).unwrap();
    let (kept, _) = kept_units(&secs, &mut info_a, &[0x1800]).expect("cut down");
    assert_eq!(&kept[..], &a[..]);
    let Info::Inflating { out, .. } = &info_a else {
        unreachable!()
    };
    assert!(
        out.len() < a.len() + super::INFLATE_STEP_BYTES + 1,
        "{}",
        out.len()
    );
    assert_eq!(&info_a.whole().unwrap()[..], &info[..]);

    let mut info_b = Info::inflating(&data).unwrap();
    let (kept, _) = kept_units(&secs, &mut info_b, &[0x3000]).expect("cut down");
    assert_eq!(&kept[..], &b[..]);
    assert_eq!(&info_b.whole().unwrap()[..], &info[..]);

    // Corrupt bytes, or a size past what they inflate to: no unit, no section.
    let bad = object::CompressedData {
        data: &packed[..packed.len() / 2],
        ..data
    };
    assert!(kept_units(&secs, &mut Info::inflating(&bad).unwrap(), &[0x3000]).is_none());
    assert!(Info::inflating(&bad).unwrap().whole().is_none());
    let long = object::CompressedData {
        uncompressed_size: info.len() as u64 + 1,
        ..data
    };
    assert!(Info::inflating(&long).unwrap().whole().is_none());
}

/// An abbreviation: code, tag, children, then (attribute, form) pairs and the (0, 0) end.
fn abbrev(code: u8, pairs: &[(u8, u8)]) -> Vec<u8> {
    let mut out = vec![code, 0x11, 1];
    for &(a, f) in pairs {
        out.extend([a, f]);
    }
    out.extend([0, 0]);
    out
}

#[test]
fn tables_with_references_into_other_units_are_told() {
    // DW_AT_name/DW_FORM_strp, DW_AT_abstract_origin/DW_FORM_ref4: unit-relative only.
    let mut local = abbrev(1, &[(0x03, 0x0e), (0x31, 0x13)]);
    local.push(0);
    assert_eq!(refers_across_units(&local, 0), Some(false));
    // DW_AT_abstract_origin/DW_FORM_ref_addr, in the second abbreviation.
    let mut across = abbrev(1, &[(0x03, 0x0e)]);
    across.extend(abbrev(2, &[(0x31, 0x10)]));
    across.push(0);
    assert_eq!(refers_across_units(&across, 0), Some(true));
    // A table cut before its end, and an offset past the section, do not read.
    assert_eq!(refers_across_units(&local[..4], 0), None);
    assert_eq!(refers_across_units(&local, local.len() + 1), None);
}
