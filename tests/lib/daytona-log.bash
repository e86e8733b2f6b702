# The Daytona test server's request log, for daytona.bats and daytona-workspace.bats.

# A jq filter over a list of requests: the list less the call runner's polls. The runner answers
# a go (or a poll) once the call ended, or after at most 2 s, or once output came and 0.25 s
# passed; a call not ended then is asked about again with a poll (the log's verb), which a call
# that ran long (a loaded machine) may need and a quick one does not.
# shellcheck disable=SC2016
DT_UNPOLLED='map(select(.verb != "poll"))'
