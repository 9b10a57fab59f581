"""A skill imported as a zip: layouts it accepts, and the hostile archives it refuses."""

from __future__ import annotations

import io
import stat
import struct
import time
import warnings
import zipfile

import pytest

from adapters.skills.front_matter import YamlFrontMatterParser
from adapters.skills.zip_bundle import ZipSkillBundleReader
from domain.errors import Invalid
from domain.skills import BundledFile, check_folder_matches

MIB = 1024 * 1024
SKILL_MD = "---\nname: my-skill\ndescription: Does things.\n---\n# My skill\n"
reader = ZipSkillBundleReader()

Entry = tuple[str | zipfile.ZipInfo, bytes | str]


def make_zip(entries: list[Entry], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate names are written on purpose
        with zipfile.ZipFile(buffer, "w", compression=compression) as zipped:
            for name, content in entries:
                zipped.writestr(name, content)
    return buffer.getvalue()


def symlink(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


def patch_headers(archive: bytes, name: str, local: int, central: int, value: bytes) -> bytes:
    """`archive` with `value` written at `local` bytes into `name`'s local header and at
    `central` bytes into its central directory header."""
    data = bytearray(archive)
    encoded = name.encode()
    for signature, name_at, field_at in ((b"PK\x03\x04", 26, local), (b"PK\x01\x02", 28, central)):
        at = data.find(signature)
        while at >= 0:
            (length,) = struct.unpack_from("<H", data, at + name_at)
            start = at + name_at + (4 if signature == b"PK\x03\x04" else 18)
            if data[start : start + length] == encoded:
                data[at + field_at : at + field_at + len(value)] = value
            at = data.find(signature, at + 1)
    return bytes(data)


def refusal(archive: bytes, bundle_reader: ZipSkillBundleReader = reader) -> str:
    with pytest.raises(Invalid) as caught:
        bundle_reader.read(archive)
    assert caught.value.message == "Invalid skill archive"
    [detail] = caught.value.details
    assert detail["field"] == "archive"
    return str(detail["message"])


def test_skill_md_at_the_root():
    bundle = reader.read(
        make_zip(
            [
                ("SKILL.md", SKILL_MD),
                ("scripts/run.py", "print('hi')\n"),
                ("references/REF.md", "# Ref\n"),
                ("assets/logo.png", b"\x89PNG\r\n"),
            ]
        )
    )
    assert bundle.folder is None
    assert bundle.skill_md == SKILL_MD
    assert bundle.files == [
        BundledFile(path="assets/logo.png", content=b"\x89PNG\r\n", content_type="image/png"),
        BundledFile(path="references/REF.md", content=b"# Ref\n", content_type="text/markdown"),
        BundledFile(path="scripts/run.py", content=b"print('hi')\n", content_type="text/x-python"),
    ]


def test_skill_md_in_the_single_top_level_folder_with_directory_entries():
    bundle = reader.read(
        make_zip(
            [
                ("my-skill/", b""),
                ("my-skill/SKILL.md", SKILL_MD),
                ("my-skill/scripts/", b""),
                ("my-skill/scripts/run.sh", "echo hi\n"),
            ]
        )
    )
    assert bundle.folder == "my-skill"
    assert [f.path for f in bundle.files] == ["scripts/run.sh"]


def test_macos_resource_forks_and_ds_store_are_skipped():
    bundle = reader.read(
        make_zip(
            [
                ("my-skill/SKILL.md", SKILL_MD),
                ("my-skill/.DS_Store", b"\x00\x00\x00\x01Bud1"),
                ("my-skill/scripts/.DS_Store", b"\x00"),
                (".DS_Store", b"\x00"),
                ("__MACOSX/my-skill/._SKILL.md", b"\x00\x05\x16\x07"),
                ("my-skill/notes.txt", "n"),
            ]
        )
    )
    assert bundle.folder == "my-skill"
    assert [f.path for f in bundle.files] == ["notes.txt"]


def test_skill_md_is_kept_byte_for_byte():
    raw = "\ufeff---\r\nname: my-skill\r\ndescription: d\r\n---\r\nBody é\r\n".encode()
    bundle = reader.read(make_zip([("SKILL.md", raw)]))
    assert bundle.skill_md.encode("utf-8") == raw
    assert bundle.files == []


def test_a_nested_skill_md_is_an_ordinary_bundled_file():
    bundle = reader.read(make_zip([("SKILL.md", SKILL_MD), ("docs/SKILL.md", "other")]))
    assert [f.path for f in bundle.files] == ["docs/SKILL.md"]


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_stored_and_deflated_entries_are_read(compression):
    bundle = reader.read(make_zip([("SKILL.md", SKILL_MD), ("a.txt", "a" * 1000)], compression))
    assert bundle.files[0].content == b"a" * 1000


@pytest.mark.parametrize(
    "entries",
    [
        [],
        [("README.md", "# not a skill")],
        [("skill.md", SKILL_MD)],
        [("a/b/SKILL.md", SKILL_MD)],
        [("one/SKILL.md", SKILL_MD), ("two/SKILL.md", SKILL_MD)],
        [("my-skill/SKILL.md", SKILL_MD), ("stray.txt", "x")],
        [("my-skill/", b""), ("my-skill/scripts/run.sh", "x")],
    ],
)
def test_an_archive_without_skill_md_in_its_place_is_refused(entries):
    assert "no SKILL.md" in refusal(make_zip(entries))


@pytest.mark.parametrize(
    "archive",
    [
        b"",
        b"not a zip at all",
        bytes(range(256)) * 16,
        b"PK\x03\x04" + b"\x00" * 100,
        make_zip([("SKILL.md", SKILL_MD)])[:-30],
    ],
)
def test_a_file_that_is_not_a_zip_is_refused(archive):
    assert refusal(archive) == "is not a valid zip archive"


def test_more_than_500_entries_are_refused():
    entries: list[Entry] = [("SKILL.md", SKILL_MD)]
    entries += [(f"f{i}.txt", "x") for i in range(499)]
    assert len(reader.read(make_zip(entries)).files) == 499
    entries.append(("one-too-many.txt", "x"))
    assert refusal(make_zip(entries)) == "has more than 500 entries"


@pytest.mark.parametrize("name", ["link", "my-skill/link", "SKILL.md"])
def test_a_symbolic_link_is_refused(name):
    entries: list[Entry] = [(symlink(name), "/etc/passwd")]
    if name != "SKILL.md":
        entries.insert(0, ("SKILL.md" if "/" not in name else "my-skill/SKILL.md", SKILL_MD))
    assert "is a symbolic link" in refusal(make_zip(entries))


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("../evil.txt", "'..'"),
        ("scripts/../../evil.txt", "'..'"),
        ("/etc/cron.d/evil", "relative"),
        ("scripts\\run.sh", "backslash"),
        ("..\\..\\evil.txt", "backslash"),
        ("C:/Windows/evil.dll", "letters, digits"),
        ("scripts//run.sh", "empty segment"),
        ("./run.sh", "'.'"),
        ("my file.txt", "letters, digits"),
        ("x" * 256, "255"),
    ],
)
def test_a_path_breaking_the_rules_is_refused(name, rule):
    message = refusal(make_zip([("SKILL.md", SKILL_MD), (name, "x")]))
    assert message.startswith(f"entry {name!r}: path ")
    assert rule in message


def test_a_path_escaping_the_top_level_folder_is_refused():
    archive = make_zip([("my-skill/SKILL.md", SKILL_MD), ("my-skill/../../evil.txt", "x")])
    assert "'..'" in refusal(archive)


@pytest.mark.parametrize("folder", ["..", "C:", "bad folder"])
def test_a_top_level_folder_breaking_the_rules_is_refused(folder):
    archive = make_zip([(f"{folder}/SKILL.md", SKILL_MD), (f"{folder}/a.txt", "x")])
    assert f"entry '{folder}/': path" in refusal(archive)


def test_an_absolute_skill_md_is_refused():
    assert "path must not be empty" in refusal(make_zip([("/SKILL.md", SKILL_MD)]))


def test_the_stripped_path_may_use_the_full_length():
    name = "x" * 255
    bundle = reader.read(make_zip([("my-skill/SKILL.md", SKILL_MD), (f"my-skill/{name}", "x")]))
    assert bundle.files[0].path == name


def test_a_nul_in_an_entry_name_is_refused():
    archive = make_zip([("SKILL.md", SKILL_MD), ("evil.txtX../x", "x")])
    archive = archive.replace(b"evil.txtX", b"evil.txt\x00")
    assert "NUL" in refusal(archive)


def test_duplicate_entries_are_refused():
    archive = make_zip([("SKILL.md", SKILL_MD), ("a.txt", "one"), ("a.txt", "two")])
    assert refusal(archive) == "entry 'a.txt' appears more than once"


def test_a_duplicate_skill_md_is_refused():
    archive = make_zip([("SKILL.md", SKILL_MD), ("SKILL.md", "---\nname: other\n---\n")])
    assert "appears more than once" in refusal(archive)


def test_a_path_that_is_both_a_file_and_a_folder_is_refused():
    archive = make_zip([("SKILL.md", SKILL_MD), ("scripts", "x"), ("scripts/run.sh", "y")])
    assert refusal(archive) == "entry 'scripts' is both a file and a folder"
    archive = make_zip([("SKILL.md", SKILL_MD), ("SKILL.md/x", "y")])
    assert "both a file and a folder" in refusal(archive)


def test_an_encrypted_entry_is_refused():
    archive = make_zip([("SKILL.md", SKILL_MD), ("secret.txt", "x")])
    archive = patch_headers(archive, "secret.txt", 6, 8, struct.pack("<H", 0x1))
    assert refusal(archive) == "entry 'secret.txt' is encrypted"


def test_skill_md_that_is_not_utf8_is_refused():
    archive = make_zip([("SKILL.md", "---\nname: é\n---\n".encode("latin-1"))])
    assert refusal(archive) == "SKILL.md is not UTF-8 text"


def test_a_zip_bomb_entry_is_refused():
    archive = make_zip([("SKILL.md", SKILL_MD), ("bomb.txt", bytes(10 * MIB + 1))])
    assert len(archive) < 100_000
    assert refusal(archive) == "entry 'bomb.txt' is larger than 10 MiB"


def test_an_entry_of_exactly_the_limit_is_accepted():
    small = ZipSkillBundleReader(max_entry_bytes=1000)
    bundle = small.read(make_zip([("SKILL.md", SKILL_MD), ("a.bin", bytes(1000))]))
    assert len(bundle.files[0].content) == 1000


def test_too_many_bytes_in_all_are_refused():
    entries: list[Entry] = [("SKILL.md", SKILL_MD)]
    entries += [(f"part{i}.bin", bytes(9 * MIB)) for i in range(6)]
    assert refusal(make_zip(entries)) == "holds more than 50 MiB once decompressed"


def test_the_total_limit_is_a_setting():
    small = ZipSkillBundleReader(max_entry_bytes=1000, max_total_bytes=2500)
    archive = make_zip([("SKILL.md", "x" * 600), ("a", bytes(1000)), ("b", bytes(1000))])
    assert refusal(archive, small) == "holds more than 2500 bytes once decompressed"


def test_a_zip_bomb_that_lies_about_its_size_is_refused_quickly():
    archive = make_zip([("SKILL.md", SKILL_MD), ("bomb.txt", bytes(20 * MIB))])
    archive = patch_headers(archive, "bomb.txt", 22, 24, struct.pack("<I", 100))
    assert zipfile.ZipFile(io.BytesIO(archive)).getinfo("bomb.txt").file_size == 100
    started = time.monotonic()
    assert "'bomb.txt' is damaged" in refusal(archive)
    assert time.monotonic() - started < 1


def test_a_size_header_over_the_limit_is_refused_before_decompressing():
    archive = make_zip([("SKILL.md", SKILL_MD), ("big.txt", "tiny")])
    archive = patch_headers(archive, "big.txt", 22, 24, struct.pack("<I", 11 * MIB))
    assert refusal(archive) == "entry 'big.txt' is larger than 10 MiB"


def test_corrupt_compressed_data_is_refused():
    archive = make_zip([("SKILL.md", SKILL_MD), ("data.txt", "hello world " * 1000)])
    start = archive.find(b"data.txt") + len(b"data.txt")
    corrupt = archive[:start] + b"\xff" * 16 + archive[start + 16 :]
    assert "'data.txt' is damaged" in refusal(corrupt)


def test_an_unsupported_compression_method_is_refused():
    archive = make_zip([("SKILL.md", SKILL_MD), ("data.txt", "x")])
    archive = patch_headers(archive, "data.txt", 8, 10, struct.pack("<H", 99))
    assert "compressed with a method other than deflate" in refusal(archive)


@pytest.mark.parametrize("method", [zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_methods_that_inflate_a_whole_block_at_once_are_refused_unread(method):
    """A bzip2 block of zeros declared as 100 bytes would inflate to hundreds of MiB in one
    read before any limit could count it: such entries are refused before decompressing."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("SKILL.md", SKILL_MD)
        archive.writestr("big.txt", b"\0" * (1 << 20), compress_type=method)
    started = time.monotonic()
    assert "'big.txt' is compressed with a method other than deflate" in refusal(buffer.getvalue())
    assert time.monotonic() - started < 0.5


def test_a_folder_not_named_as_the_skill_is_refused():
    bundle = reader.read(make_zip([("other-name/SKILL.md", SKILL_MD)]))
    manifest = YamlFrontMatterParser().parse(bundle.skill_md)
    with pytest.raises(Invalid) as caught:
        check_folder_matches(manifest, bundle.folder)
    [detail] = caught.value.details
    assert detail["field"] == "name"
    check_folder_matches(manifest, "my-skill")
