"""pprof's message definitions (google/pprof, proto/profile.proto: package
`perftools.profiles`), built at run time with protobuf's own descriptor messages, so that a
`record --format pprof` file is parsed by protobuf itself, not by our reading of the wire
format. The field names, numbers and types are the spec's; nothing here is generated or
fetched. `parse(path)` returns a `Profile` message."""

import gzip

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PACKAGE = "perftools.profiles"

F = descriptor_pb2.FieldDescriptorProto
INT64, UINT64, STRING, BOOL, MESSAGE = (F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_STRING, F.TYPE_BOOL,
                                         F.TYPE_MESSAGE)
ONE, MANY = F.LABEL_OPTIONAL, F.LABEL_REPEATED

# (message, [(field, number, type, label, message type)]), as profile.proto declares them.
MESSAGES = [
    ("Profile", [
        ("sample_type", 1, MESSAGE, MANY, "ValueType"),
        ("sample", 2, MESSAGE, MANY, "Sample"),
        ("mapping", 3, MESSAGE, MANY, "Mapping"),
        ("location", 4, MESSAGE, MANY, "Location"),
        ("function", 5, MESSAGE, MANY, "Function"),
        ("string_table", 6, STRING, MANY, None),
        ("drop_frames", 7, INT64, ONE, None),
        ("keep_frames", 8, INT64, ONE, None),
        ("time_nanos", 9, INT64, ONE, None),
        ("duration_nanos", 10, INT64, ONE, None),
        ("period_type", 11, MESSAGE, ONE, "ValueType"),
        ("period", 12, INT64, ONE, None),
        ("comment", 13, INT64, MANY, None),
        ("default_sample_type", 14, INT64, ONE, None),
    ]),
    ("ValueType", [("type", 1, INT64, ONE, None), ("unit", 2, INT64, ONE, None)]),
    ("Sample", [
        ("location_id", 1, UINT64, MANY, None),
        ("value", 2, INT64, MANY, None),
        ("label", 3, MESSAGE, MANY, "Label"),
    ]),
    ("Label", [
        ("key", 1, INT64, ONE, None),
        ("str", 2, INT64, ONE, None),
        ("num", 3, INT64, ONE, None),
        ("num_unit", 4, INT64, ONE, None),
    ]),
    ("Mapping", [
        ("id", 1, UINT64, ONE, None),
        ("memory_start", 2, UINT64, ONE, None),
        ("memory_limit", 3, UINT64, ONE, None),
        ("file_offset", 4, UINT64, ONE, None),
        ("filename", 5, INT64, ONE, None),
        ("build_id", 6, INT64, ONE, None),
        ("has_functions", 7, BOOL, ONE, None),
        ("has_filenames", 8, BOOL, ONE, None),
        ("has_line_numbers", 9, BOOL, ONE, None),
        ("has_inline_frames", 10, BOOL, ONE, None),
    ]),
    ("Location", [
        ("id", 1, UINT64, ONE, None),
        ("mapping_id", 2, UINT64, ONE, None),
        ("address", 3, UINT64, ONE, None),
        ("line", 4, MESSAGE, MANY, "Line"),
        ("is_folded", 5, BOOL, ONE, None),
    ]),
    ("Line", [
        ("function_id", 1, UINT64, ONE, None),
        ("line", 2, INT64, ONE, None),
        ("column", 3, INT64, ONE, None),
    ]),
    ("Function", [
        ("id", 1, UINT64, ONE, None),
        ("name", 2, INT64, ONE, None),
        ("system_name", 3, INT64, ONE, None),
        ("filename", 4, INT64, ONE, None),
        ("start_line", 5, INT64, ONE, None),
    ]),
]


def _profile_class():
    f = descriptor_pb2.FileDescriptorProto(name="profile.proto", package=PACKAGE, syntax="proto3")
    for name, fields in MESSAGES:
        m = f.message_type.add(name=name)
        for field, number, type_, label, of in fields:
            d = m.field.add(name=field, number=number, type=type_, label=label)
            if of:
                d.type_name = ".%s.%s" % (PACKAGE, of)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(PACKAGE + ".Profile"))


Profile = _profile_class()


def parse(path):
    """The gzipped profile at `path`. `gzip.decompress` is the independent check that the file
    is gzip (its header, its CRC and its length)."""
    p = Profile()
    p.ParseFromString(gzip.decompress(path.read_bytes()))
    return p


def stacks(p):
    """{(labels, stack): count}: `stack` root first, each frame `function (file:line)` as the
    collapsed format writes it; `labels` a sorted tuple of (key, value) of the sample's labels."""
    s = p.string_table
    functions = {f.id: f for f in p.function}
    frames = {}
    for loc in p.location:
        assert len(loc.line) == 1, loc
        f = functions[loc.line[0].function_id]
        assert f.system_name == f.name, f
        name, file, line = s[f.name], s[f.filename], loc.line[0].line
        frames[loc.id] = name if not file else (
            "%s (%s)" % (name, file) if line == 0 else "%s (%s:%d)" % (name, file, line))
    out = {}
    for sample in p.sample:
        labels = tuple(sorted((s[l.key], s[l.str] if l.str else l.num) for l in sample.label))
        stack = ";".join(frames[i] for i in reversed(sample.location_id))
        out[(labels, stack)] = out.get((labels, stack), 0) + sample.value[0]
    return out
