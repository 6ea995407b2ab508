"""Error identity: a code keeps what names it, and another number of the same code conflicts."""

import pytest

from index.codes import code_name, conflicts, error_codes


@pytest.mark.parametrize(
    "line,codes",
    [
        ("OSError: (External) NCCL error(2), unhandled system error", {"nccl_error_2", "error_2"}),
        ("RuntimeError: NCCL Error 5: invalid usage", {"nccl_error_5"}),
        ("ExternalError: Cuda error(38), no CUDA-capable device is detected.", {"cuda_error_38", "error_38"}),
        ("RuntimeError: cuda runtime error (101) : invalid device ordinal", {"cuda_error_101", "error_101"}),
        ("HCCL init failed, ret = 1343225860", {"ret_1343225860"}),
        ("Call rtSetDevice failed, ret[507033].", {"ret_507033"}),
        ("EI0006: Getting socket times out. Reason: remote rank did not send", {"ei0006"}),
        ("EJ0001: HCCP init failed; E39999: Inner Error", {"ej0001", "e39999"}),
        ("[PTA] ERR02200 DIST call hccl api failed, ERR99999 unknown", {"err02200", "err99999"}),
        ("aclrtSynchronizeStream failed, error code is 507035", {"code_507035"}),
        ("bind failed: [Errno 98] Address already in use", {"errno_98"}),
        ("worker failed (exitcode: -9) local_rank: 0", {"exit_-9"}),
        ("NCCL version 2.18.1 on CUDA 12.1", set()),  # versions are not codes
        ("CUDA error: invalid device ordinal", set()),
    ],
)
def test_codes_keep_their_name(line, codes):
    assert error_codes(line) == codes


def test_another_number_of_the_same_code_conflicts():
    q = error_codes("OSError: (External) NCCL error(2), unhandled system error")
    assert conflicts(q, error_codes("OSError: (External) NCCL error(5), invalid usage."))
    assert not conflicts(q, error_codes("NCCL error(2) or NCCL error(5)"))  # covers both
    assert not conflicts(q, error_codes("EI0006 socket timeout"))  # another kind of code
    assert not conflicts(frozenset(), error_codes("NCCL error(5)"))
    assert code_name("nccl_error_2") == "nccl_error" and code_name("ei0006") is None
