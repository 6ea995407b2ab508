"""A post names its product (in a pip row, a wheel's name, a launcher) and the entry of that
product's document comes first, even when another product's FAQ shares the error's words.
Real documents from ../shared/corpus, the real embedder and the shipped model (index/topics.py)."""

import shutil

import pytest
from conftest import CORPUS, needs_shared

pytestmark = [pytest.mark.slow, needs_shared]


@pytest.fixture(scope="module")
def three_products(tmp_path_factory):
    from kb.indexing import ingest
    from kb.service import KnowledgeBase

    docs = tmp_path_factory.mktemp("products")
    shutil.copytree(CORPUS / "paddle" / "en", docs / "paddle")
    shutil.copytree(CORPUS / "ascend_pytorch" / "en", docs / "ascend_pytorch")
    (docs / "mindspore").mkdir()
    shutil.copy(CORPUS / "mindspore" / "en" / "installation.md", docs / "mindspore")
    index = docs.parent / (docs.name + "-index")
    ingest([str(docs)], index)
    return KnowledgeBase.open(index=str(index))


def _products(result) -> list[str]:
    return [h.entry.doc.split("/")[0] for h in (result.hits or result.suggestions)]


def test_a_wheel_error_goes_to_the_faq_of_the_product_in_the_wheels_name(three_products):
    # Both the Paddle and the MindSpore FAQ answer "is not a supported wheel on this platform";
    # the MindSpore one says it twice, in two question titles, and used to come first.
    paddle = """install error on my server
$ python3 -m pip install paddlepaddle_gpu-2.6.1.post120-cp38-cp38-linux_x86_64.whl
ERROR: paddlepaddle_gpu-2.6.1.post120-cp38-cp38-linux_x86_64.whl is not a supported wheel on this platform.
"""
    result = three_products.search(paddle)
    assert _products(result)[:2] == ["paddle", "paddle"]
    assert "supported wheel" in (result.hits or result.suggestions)[0].entry.title
    mindspore = (
        "ERROR: mindspore-2.3.1-cp39-cp39-linux_aarch64.whl is not a supported wheel on this platform."
    )
    assert _products(three_products.search(mindspore))[:2] == ["mindspore", "mindspore"]


def test_a_crash_is_looked_up_in_the_product_the_pip_list_names(three_products):
    post = """After installing the gpu build with pip, my script crashes with a segmentation fault
paddlepaddle-gpu   2.6.1
Segmentation fault (core dumped)
"""
    assert _products(three_products.search(post))[0] == "paddle"
