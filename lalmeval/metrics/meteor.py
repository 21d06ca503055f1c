"""meteor: nltk's METEOR over Debian's WordNet 3.0 (optional extra: nltk and apt's wordnet-base)."""

from __future__ import annotations

import functools
import importlib.util
import io
import os
import warnings
from pathlib import Path
from typing import Any, Optional

from lalmeval.catalog.bundled import install
from lalmeval.config.schema import Config
from lalmeval.errors import UserError
from lalmeval.metrics.base import METRICS, MeanMetric, SampleScore, empty_reference, text_pair, unscored
from lalmeval.results.records import Record
from lalmeval.metrics.peer_text import PeerText, au_round, peer_text, side_by_side

DEBIAN_WORDNET = Path("/usr/share/wordnet")
INSTALL_HINT = f"{install('meteor')} (nltk) and apt-get install wordnet-base (WordNet 3.0 in /usr/share/wordnet), or set LALMEVAL_WORDNET_DIR"

# WordNet 3.0's lexicographer files (lexnames(5WN), shipped as a man page by wordnet-base): nltk
# reads them from a 'lexnames' file that Debian's data package leaves out.
_LEXNAMES = (
    "adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute noun.body noun.cognition "
    "noun.communication noun.event noun.feeling noun.food noun.group noun.location noun.motive noun.object "
    "noun.person noun.phenomenon noun.plant noun.possession noun.process noun.quantity noun.relation noun.shape "
    "noun.state noun.substance noun.time verb.body verb.change verb.cognition verb.communication verb.competition "
    "verb.consumption verb.contact verb.creation verb.emotion verb.motion verb.perception verb.possession "
    "verb.social verb.stative verb.weather adj.ppl"
).split()
_POS = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}


def lexnames() -> str:
    """The content of WordNet 3.0's 'lexnames' file: number, name and syntactic category per line."""
    return "".join(f"{i:02d}\t{name}\t{_POS[name.split('.')[0]]}\n" for i, name in enumerate(_LEXNAMES))


def wordnet_dir() -> Optional[Path]:
    """Where WordNet's database files are: LALMEVAL_WORDNET_DIR, else Debian's wordnet-base."""
    override = os.environ.get("LALMEVAL_WORDNET_DIR")
    candidate = Path(override) if override else DEBIAN_WORDNET
    return candidate if (candidate / "data.noun").exists() else None


def load_wordnet(root: Path) -> Any:
    """An nltk WordNet reader over `root`, authorized in nltk's data path, with 'lexnames' supplied if missing."""
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class Reader(WordNetCorpusReader):
        def open(self, fileid: str) -> Any:
            if fileid == "lexnames" and not (root / "lexnames").exists():
                return io.StringIO(lexnames())
            return super().open(fileid)

        def map_wn(self, version: str = "wordnet") -> None:
            # A mapping onto nltk's own WordNet 3.0 download, for multilingual (OMW) lookups: this is WordNet 3.0.
            return None

    # nltk opens corpus files only below the folders of its data path.
    if str(root) not in nltk.data.path:
        nltk.data.path.append(str(root))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "multilingual functions are not available": English only here
        return Reader(str(root), None)


@METRICS.register("meteor")
class Meteor(MeanMetric):
    """Mean nltk METEOR (WordNet 3.0 synonyms, Porter stems), references and replies tokenized by nltk."""

    name = "meteor"
    reads_protocol = True

    @classmethod
    def check(cls, config: Config) -> None:
        if importlib.util.find_spec("nltk") is None or wordnet_dir() is None:
            raise UserError(f"metric 'meteor' needs nltk and WordNet: {INSTALL_HINT}")

    @functools.cached_property
    def _wordnet(self) -> Any:
        return load_wordnet(wordnet_dir())

    @functools.cached_property
    def _tokenize(self) -> Any:
        # word_tokenize without its sentence splitter (punkt is a separate download): same tokens within a sentence.
        from nltk.tokenize import NLTKWordTokenizer

        return NLTKWordTokenizer().tokenize

    def score_record(self, record: Record) -> SampleScore:
        from nltk.translate.meteor_score import meteor_score

        hypothesis, reference = text_pair(record)
        if (empty := empty_reference(reference)) is not None:
            return unscored(empty)
        value = 100.0 * meteor_score([self._tokenize(reference)], self._tokenize(hypothesis), wordnet=self._wordnet)
        if self.peer is None:
            return {"score": value}
        # The peer's METEOR: its normalized texts split at spaces, each sample rounded as it rounds them.
        ref, hyp = (self.peer.prepare(text, self.dataset).split() for text in (reference, hypothesis))
        peer = au_round(meteor_score([ref], hyp, wordnet=self._wordnet), self.peer.meteor_rounding)
        return {"score": 100.0 * peer, "own_score": value}

    @functools.cached_property
    def peer(self) -> Optional[PeerText]:
        rules = peer_text(self.dataset)
        return rules if rules is not None and rules.meteor_rounding is not None else None

    def aggregate(self, items: list[SampleScore]) -> tuple[Optional[float], dict[str, Any]]:
        value, details = super().aggregate(items)
        wordnet = wordnet_dir()
        details = {**details, "tokenizer": "str.split after the peer's normalization" if self.peer else "nltk NLTKWordTokenizer",
                   "wordnet": str(wordnet) if wordnet else None,
                   "wordnet_version": self._wordnet.get_version() if wordnet and details["scored"] else None}
        own = [x["own_score"] for x in items if x["score"] is not None and "own_score" in x]
        if self.peer is not None and own:
            details["lalmeval"] = {**side_by_side(self.peer, value, sum(own) / len(own)), "tokenizer": "nltk NLTKWordTokenizer"}
        return value, details
