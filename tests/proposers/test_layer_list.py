"""One syntax for a layer list, read by one parser (proposers/layer_skip.parse_layers): the CLI's
--layers, the page's Layers knob and the advisor's `layerskip:` candidates read the same text the
same way, and a bad part gets a sentence naming it."""
from __future__ import annotations

import argparse

import pytest

from specviz import cli
from specviz.advise.survey import Candidate
from specviz.proposers.layer_skip import layers_text, parse_layers
from specviz.ui.runtime.settings import parse_layers as knob_layers


@pytest.mark.parametrize("text,expected", [("0-2+5", [0, 1, 2, 5]), ("0-2,5", [0, 1, 2, 5]),
                                           ("5, 0-2", [0, 1, 2, 5]), ("3", [3]), ("0-1+1-2", [0, 1, 2])])
def test_every_reader_takes_the_same_text_to_the_same_layers(text, expected):
    """'+' and ',' both join parts, ranges are inclusive, the result is sorted and each layer once:
    the CLI, the page's knob and an advisor candidate give exactly that list."""
    assert parse_layers(text) == expected
    assert cli._layers(text) == expected
    assert list(knob_layers(text)) == expected
    assert list(Candidate.parse(f"layerskip:{text.replace(',', '+')}").layers) == expected


def test_a_list_written_out_reads_back():
    """layers_text writes the shortest ranges, and parse_layers reads them back unchanged."""
    for layers in ([0, 1, 2, 5, 6], [0], [0, 2, 4], list(range(30))):
        assert parse_layers(layers_text(layers)) == layers
    assert layers_text([0, 1, 2, 5, 6]) == "0-2+5-6"


@pytest.mark.parametrize("text", ["0,x", "1-", "a-b", "+", "-3"])
def test_a_bad_part_gets_a_sentence_naming_it_everywhere(text):
    """A part that is not a number or a range is named in the error, with an example, from the parser,
    the CLI (as an argparse error) and the page's knob (prefixed 'Layers:'); blank means the default
    on the page."""
    with pytest.raises(ValueError, match="e.g. 0-9\\+20-29"):
        parse_layers(text)
    with pytest.raises(argparse.ArgumentTypeError, match="0-9\\+20-29"):
        cli._layers(text)
    with pytest.raises(ValueError, match="^Layers: "):
        knob_layers(text)
    assert knob_layers("  ") is None
