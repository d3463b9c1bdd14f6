"""What a schedd and shadow do for ``startd submit``: the submit description language and the job ads
condor_submit builds (:mod:`.language`, :mod:`.queue`, :mod:`.jobad`, :mod:`.requirements`), the ``-dry-run``
output (:mod:`.dryrun`), the user job event log (:mod:`.eventlog`) and the following of the jobs
(:mod:`.shadow`). File transfer itself is the starter's (:mod:`startd.starter.transfer`)."""

from .jobad import Job, make_jobs
from .language import SubmitDescription, SubmitError, parse_submit

__all__ = ["Job", "SubmitDescription", "SubmitError", "make_jobs", "parse_submit"]
