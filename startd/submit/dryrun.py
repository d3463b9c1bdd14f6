"""``condor_submit -dry-run FILE``: the job ads written as condor_submit's simulated schedd writes them
(``SimScheddQ``, src/condor_submit.V6/submit_simulate.cpp, and ``MySendJobAttributes`` in submit.cpp).

The plain form writes, for each cluster, ``ClusterId=N`` and the cluster ad (the first job's attributes but
``ProcId`` and ``JobStatus``), then for every job a blank line's worth of separation (``get_NewProc`` writes a
newline), ``ProcId=P``, ``JobStatus=S`` and the attributes that differ from the cluster ad, one ``Name=value``
a line in the old ClassAd syntax. ``-dry-run:full`` writes one whole ad a job (``Name = value``), a blank line
between. On standard output condor_submit interleaves these with its progress: ``Dry-Run job(s)``, a ``.`` a
job and ``N job(s) dry-run to cluster C.``.
"""

from __future__ import annotations

from typing import TextIO

from ..classad import ClassAd
from ..classad.unparse import unparse_old
from .jobad import Job

_PROC_ONLY = ("procid", "jobstatus")


def _lines(ad: ClassAd) -> list[tuple[str, str]]:
    """(name, old-syntax text) of every attribute, in the ad's order."""
    out = []
    for line in unparse_old(ad).splitlines():
        name, _, text = line.partition(" = ")
        out.append((name, text))
    return out


def write_dry_run(jobs: list[Job], out: TextIO, progress: TextIO | None, *, full: bool = False) -> None:
    """Write the jobs' ads to ``out``; ``progress`` (standard output, or None when ``out`` is it and the file
    names ``-``... see :func:`dry_run_text`) gets condor_submit's progress lines."""
    if progress is not None:
        progress.write("Dry-Run job(s)")
    if full:
        for i, job in enumerate(jobs):
            if progress is not None:
                progress.write(".")
            ad = job.ad.copy()
            ad["ClusterId"] = job.cluster
            ad["ProcId"] = job.proc
            out.write("\n")
            for name, text in _lines(ad):
                out.write(f"{name} = {text}\n")
            del i
    else:
        cluster_attrs: dict[str, str] = {}
        for job in jobs:
            out.write("\n")
            lines = _lines(job.ad)
            if job.proc == 0 or not cluster_attrs:
                out.write(f"ClusterId={job.cluster}\n")
                cluster_attrs = {}
                for name, text in lines:
                    if name.lower() in _PROC_ONLY:
                        continue
                    cluster_attrs[name.lower()] = text
                    out.write(f"{name}={text}\n")
            out.write(f"ProcId={job.proc}\n")
            status = dict((n.lower(), t) for n, t in lines).get("jobstatus", "1")
            out.write(f"JobStatus={status}\n")
            for name, text in lines:
                low = name.lower()
                if low in _PROC_ONLY or cluster_attrs.get(low) == text:
                    continue
                out.write(f"{name}={text}\n")
            if progress is not None:
                progress.write(".")
    if progress is not None:
        progress.write("\n")
        clusters: dict[int, int] = {}
        for job in jobs:
            clusters[job.cluster] = clusters.get(job.cluster, 0) + 1
        for cluster, count in clusters.items():
            progress.write(f"{count} job(s) dry-run to cluster {cluster}.\n")
