"""One exception class per kind of failure (the kinds that choose the CLI's exit status), on
copies of the fixture lake. The service's refusal (`ServiceError` with its status) is tested in
test_package.py against the simulator."""

import fcntl
import shutil
from pathlib import Path

import pytest

import dexlake
from dexlake import errors

TOKEN = "T0000000000000000000000000000000000000000"


@pytest.fixture
def lake_copy(fixture_lake, tmp_path):
    """A copy of the fixture lake that a test may damage or lock."""
    root, _, _ = fixture_lake
    copy = tmp_path / "lake"
    shutil.copytree(root, copy)
    return copy


def test_a_bad_argument_is_an_invalid_argument_error_and_a_value_error(lake_copy):
    with pytest.raises(dexlake.InvalidArgumentError, match="interval") as bad:
        dexlake.Lake(lake_copy).bars(TOKEN, interval=0)
    assert isinstance(bad.value, ValueError) and isinstance(bad.value, dexlake.DexlakeError)


@pytest.mark.filterwarnings("ignore::dexlake.CoverageWarning")
def test_nothing_found_is_a_no_data_error(lake_copy):
    with pytest.raises(dexlake.NoDataError, match="no swaps for token nope"):
        dexlake.Lake(lake_copy).bars("nope", interval=3600)


def test_strict_on_a_lake_without_coverage_is_a_coverage_error(lake_copy):
    # The fixture lake's rows came from no sync: its coverage was never recorded.
    lake = dexlake.Lake(lake_copy)
    with pytest.warns(dexlake.CoverageWarning):
        lake.bars(TOKEN, interval=3600)
    with pytest.raises(dexlake.CoverageError, match="strict"):
        lake.bars(TOKEN, interval=3600, strict=True)


def test_a_damaged_file_is_a_damaged_lake_error_not_a_value_error(lake_copy):
    files = sorted((lake_copy / "swaps").rglob("*.parquet"))
    assert files
    damaged = files[0]
    with open(damaged, "r+b") as f:
        f.truncate(damaged.stat().st_size // 2)
    lake = dexlake.Lake(lake_copy)
    with pytest.raises(dexlake.DamagedLakeError) as refused:
        lake.leaderboard(top=3)
    e = refused.value
    assert isinstance(e, dexlake.LakeError) and not isinstance(e, ValueError)
    text = str(e)
    assert str(damaged.relative_to(lake_copy)) in text and "dexlake verify" in text, text
    # A missing file too.
    damaged.unlink()
    with pytest.raises(dexlake.DamagedLakeError, match="it is missing"):
        lake.bars(all_tokens=True, interval=3600)


def test_a_lake_another_writer_holds_is_a_lake_busy_error(lake_copy):
    lock = Path(lake_copy) / "_dexlake" / "lock"
    with open(lock, "a+b") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(dexlake.LakeBusyError, match="locked by another writer") as busy:
            dexlake.Lake(lake_copy).compact()
        assert isinstance(busy.value, dexlake.LakeError)
    # Released, the same call works.
    assert dexlake.Lake(lake_copy).compact()["files_removed"] >= 0


def test_every_kind_has_its_class():
    # An interruption is its own class, not Python's InterruptedError (an OSError).
    assert issubclass(dexlake.DexlakeInterrupted, dexlake.DexlakeError)
    assert not issubclass(dexlake.DexlakeInterrupted, OSError)
    for name in ["DamagedLakeError", "LakeBusyError", "DexlakeInterrupted"]:
        assert name in errors.__all__ and name in dexlake.__all__
        assert getattr(dexlake, name) is getattr(errors, name)
    assert not issubclass(dexlake.DamagedLakeError, ValueError)
