"""`--runner NAME --workers N [runner options...]` -> Beam's PipelineOptions, and a pipeline's
work spread over those workers."""

# The short names `kbert --runner` takes; any other name goes to Beam as written (a runner class
# name, e.g. PrismRunner), so new runners need nothing here.
# `direct` is Beam's FnApiRunner, the batch engine behind its DirectRunner: the DirectRunner
# itself first tries the PrismRunner, whose binary it downloads from GitHub on first use (offline it
# falls back to the FnApiRunner), and nothing here downloads anything at run time.
RUNNER_NAMES = {
    "direct": "FnApiRunner",
    "dataflow": "DataflowRunner",
    "flink": "FlinkRunner",
    "spark": "SparkRunner",
    "portable": "PortableRunner",
}
# The default --runner: the one-process path, no Beam at all.
LOCAL_RUNNER = "local"
# Runners in this process's machine, whose workers are processes here (--direct_num_workers).
THIS_MACHINE = ("FnApiRunner", "DirectRunner")


def pipeline_options(runner, workers=None, extra_args=()):
    """Beam's PipelineOptions for `runner` (a short name of RUNNER_NAMES or a Beam runner name).

    direct: `workers` processes on this machine (Beam's multi_processing mode; 1 runs in this
    process). Other runners take their own options in `extra_args` (`--project`, `--region`,
    `--temp_location` for Dataflow, `--flink_master` for Flink...); `workers` becomes Dataflow's
    `--max_num_workers` and is refused for the others, whose cluster sets it. The options are
    also those this process reads remote paths with (`keras_bert_impl.file_paths`)."""
    from apache_beam.options.pipeline_options import PipelineOptions

    name = RUNNER_NAMES.get(runner, runner)
    args = ["--runner", name, *extra_args]
    if name in THIS_MACHINE:
        workers = workers or 1
        args += [
            "--direct_num_workers",
            str(workers),
            "--direct_running_mode",
            "multi_processing" if workers > 1 else "in_memory",
            # The worker processes log every channel they open at INFO otherwise.
            "--default_sdk_harness_log_level",
            "WARNING",
        ]
    elif workers is not None:
        if name != "DataflowRunner":
            raise ValueError(
                f"--workers sets the DirectRunner's processes or Dataflow's --max_num_workers; "
                f"{name}'s cluster sets its own. Received: --workers {workers} with --runner {runner}"
            )
        args += ["--max_num_workers", str(workers)]
    # Dataflow and the portable runners ship the main session's imports otherwise only by name.
    args += ["--save_main_session"] if name not in THIS_MACHINE else []
    options = PipelineOptions(args)
    # Remote paths (gs://...) that the launcher checks and copies are then read with the runner's
    # options (project, credentials) as the workers read them.
    from apache_beam.io.filesystems import FileSystems

    FileSystems.set_options(options)
    return options


def spread_tasks(pipeline, label, items):
    """`items` as a PCollection of one task each (labelled `label`): without the reshuffle a
    runner may keep `beam.Create`'s one bundle, so all the work, on one worker."""
    import apache_beam as beam

    return pipeline | label >> beam.Create(items) | "Spread" >> beam.Reshuffle()
