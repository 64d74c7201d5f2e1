"""pages.pictures: a run's stored image for a page, or a caption saying why there is none."""


def test_a_stored_picture_with_a_name_too_long_for_the_file_system_is_a_caption(tmp_path):
    """pages.pictures.stored_picture: a name over 255 bytes (ENAMETOOLONG from the file system) is 'No
    image file', not an error that stops the grid (hostile-input campaign)."""
    from core.runstore import RunInfo, RunStore
    from pages.pictures import stored_picture

    run = RunStore(tmp_path).create_run(RunInfo(run_id="r", label_space="imagenet-1k"))
    run.images_dir.mkdir(parents=True, exist_ok=True)
    assert stored_picture(run, "x" * 300) is None
