#include "kforge/jobs/job_access.h"

namespace kforge::jobs {

Status unknown_job(const std::string& id) {
  return not_found("no job with id '" + id + "'");
}

StatusOr<model::JobRecord> get_visible(JobService& service, const std::string& id,
                                       const model::Principal& principal) {
  KF_ASSIGN_OR_RETURN(model::JobRecord job, service.get(id));
  if (!principal.may_access(job.submitter)) return unknown_job(id);
  return job;
}

Status cancel_visible(JobService& service, const std::string& id, const std::string& reason,
                      const model::Principal& principal) {
  KF_RETURN_IF_ERROR(get_visible(service, id, principal).status());
  return service.cancel(id, reason);
}

Status require_admin(const model::Principal& principal, std::string_view what) {
  if (principal.may_administer()) return Status::ok();
  return Status(ErrorCode::kPermissionDenied,
                std::string(what) +
                    " needs an admin token (--admin-token-file, or a line of "
                    "--tokens-file with the role 'admin')");
}

void hide_job_ids(Json& stats, const model::Principal& principal) {
  if (principal.sees_job_ids() || !stats.is_object()) return;
  auto devices = stats.find("devices");
  if (devices == stats.end() || !devices->is_array()) return;
  for (Json& device : *devices) {
    if (!device.is_object()) continue;
    device.erase("current_job");
    auto gate = device.find("device_gate");
    if (gate == device.end() || !gate->is_object()) continue;
    if (auto holder = gate->find("holder"); holder != gate->end() && !holder->is_null()) {
      *holder = kHiddenJob;
    }
    if (auto shared = gate->find("shared_holders"); shared != gate->end() && shared->is_array()) {
      for (Json& h : *shared)
        h = kHiddenJob;
    }
  }
}

}  // namespace kforge::jobs
