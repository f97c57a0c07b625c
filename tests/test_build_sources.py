"""CMakeLists.txt names every translation unit exactly once (no file(GLOB)).

With explicit source lists a new .cpp or .cu file that nobody adds to the build
would only show up as an undefined symbol when the module is imported; and a
file named twice is compiled twice (as cpp/noise.cpp once was, for
vflsec._core_cuda). The per-file flags that keep seeded noise bit-identical
across ISA paths and the GPU must stay attached to their files.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CMAKE = ROOT / "CMakeLists.txt"

pytestmark = pytest.mark.skipif(not CMAKE.is_file(), reason="not a source checkout")


def _cmake_code() -> str:
    """CMakeLists.txt without its comments."""
    return "\n".join(line.split("#", 1)[0] for line in CMAKE.read_text().splitlines())


def test_no_glob():
    assert not re.search(r"file\s*\(\s*GLOB", _cmake_code(), re.IGNORECASE)


def _listed_sources() -> list[str]:
    """The .cpp/.cu paths of the targets' source lists (set_source_files_properties calls left out)."""
    code = re.sub(r"set_source_files_properties\([^)]*\)", "", _cmake_code())
    return re.findall(r"\bcpp/[\w/]+\.(?:cpp|cu)\b", code)


def test_every_source_listed_exactly_once():
    listed = _listed_sources()
    twice = sorted({name for name in listed if listed.count(name) > 1})
    assert not twice, f"compiled into more than one target: {twice}"
    on_disk = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "cpp").rglob("*") if p.suffix in (".cpp", ".cu"))
    assert sorted(listed) == on_disk


def test_bit_identity_flags_attached():
    code = _cmake_code()
    props = r"set_source_files_properties\(\s*{}\s+PROPERTIES\s+COMPILE_OPTIONS\s+{}"
    assert re.search(props.format(r"cpp/noise\.cpp", r'"-ffp-contract=off"'), code)
    assert re.search(props.format(r"cpp/cuda/noise\.cu", r'"-fmad=false;-Xcompiler=-ffp-contract=off"'), code)
