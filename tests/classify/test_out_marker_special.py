"""classify's --out marker (hostile campaign): a FIFO put in its place hung classify; now it is no marker."""
import os


def test_a_fifo_at_classifys_out_marker_is_no_marker(tmp_path):
    from classify.targets import OUT_MARKER_NAME, _read_out_marker
    from core.parts import PredictionParts

    parts = PredictionParts(tmp_path / ".p.csv.parts")
    parts.folder.mkdir()
    os.mkfifo(parts.folder / OUT_MARKER_NAME)
    import threading

    answer = []
    reader = threading.Thread(target=lambda: answer.append(_read_out_marker(parts)), daemon=True)
    reader.start()
    reader.join(5)  # a read that waits on the FIFO fails here, not by hanging the suite
    assert not reader.is_alive() and answer == [None]
