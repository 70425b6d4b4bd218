/*
 * A test-only nginx module: a second peer wrapper, loaded after
 * generation-retry, that wraps every http upstream's peer.init in its own
 * postconfiguration as third-party balancer modules do. Its get and free
 * log one `notice` line each on the request's connection, so a test can
 * count, per request, the calls that went through it: a wrapper inside it
 * that re-installs itself over the peer connection would make this one
 * miss calls.
 *
 * Built by `cargo xtask build` against each nginx tree (xtask/src/
 * test_wrap.rs) into the version's modules/, where
 * Flavor::with_module_wrapped (t/src/nginx/config.rs) loads it; never
 * installed anywhere else. It forwards every callback it replaces, as a
 * wrapper must: get, free, notify and, with SSL, the session pair.
 */

#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>


#define WRAP_MAX_UPSTREAMS  64


typedef struct {
    void                            *data;
    ngx_event_get_peer_pt            get;
    ngx_event_free_peer_pt           free;
    ngx_event_notify_peer_pt         notify;
#if (NGX_HTTP_SSL)
    ngx_event_set_peer_session_pt    set_session;
    ngx_event_save_peer_session_pt   save_session;
#endif
} wrap_peer_t;


typedef struct {
    ngx_http_upstream_srv_conf_t    *uscf;
    ngx_http_upstream_init_peer_pt   init;
} wrap_original_t;


static ngx_int_t wrap_postconfiguration(ngx_conf_t *cf);


/* The master's configuration writes it; workers read their fork's copy. */
static wrap_original_t  wrap_originals[WRAP_MAX_UPSTREAMS];
static ngx_uint_t       wrap_count;


static ngx_http_module_t  wrap_module_ctx = {
    NULL,                                  /* preconfiguration */
    wrap_postconfiguration,                /* postconfiguration */
    NULL, NULL, NULL, NULL, NULL, NULL
};


ngx_module_t  ngx_http_generation_retry_test_wrap_module = {
    NGX_MODULE_V1,
    &wrap_module_ctx,
    NULL,
    NGX_HTTP_MODULE,
    NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    NGX_MODULE_V1_PADDING
};


static ngx_int_t
wrap_get(ngx_peer_connection_t *pc, void *data)
{
    wrap_peer_t  *w = data;

    ngx_log_error(NGX_LOG_NOTICE, pc->log, 0, "test_wrap: get");

    return w->get(pc, w->data);
}


static void
wrap_free(ngx_peer_connection_t *pc, void *data, ngx_uint_t state)
{
    wrap_peer_t  *w = data;

    ngx_log_error(NGX_LOG_NOTICE, pc->log, 0, "test_wrap: free");

    w->free(pc, w->data, state);
}


static void
wrap_notify(ngx_peer_connection_t *pc, void *data, ngx_uint_t type)
{
    wrap_peer_t  *w = data;

    w->notify(pc, w->data, type);
}


#if (NGX_HTTP_SSL)

static ngx_int_t
wrap_set_session(ngx_peer_connection_t *pc, void *data)
{
    wrap_peer_t  *w = data;

    return w->set_session ? w->set_session(pc, w->data) : NGX_OK;
}


static void
wrap_save_session(ngx_peer_connection_t *pc, void *data)
{
    wrap_peer_t  *w = data;

    if (w->save_session) {
        w->save_session(pc, w->data);
    }
}

#endif


static ngx_int_t
wrap_init_peer(ngx_http_request_t *r, ngx_http_upstream_srv_conf_t *us)
{
    ngx_int_t     rc;
    ngx_uint_t    i;
    wrap_peer_t  *w;

    for (i = 0; i < wrap_count; i++) {
        if (wrap_originals[i].uscf == us) {
            break;
        }
    }

    if (i == wrap_count) {
        return NGX_ERROR;
    }

    rc = wrap_originals[i].init(r, us);
    if (rc != NGX_OK) {
        return rc;
    }

    w = ngx_palloc(r->pool, sizeof(wrap_peer_t));
    if (w == NULL) {
        return NGX_ERROR;
    }

    w->data = r->upstream->peer.data;
    w->get = r->upstream->peer.get;
    w->free = r->upstream->peer.free;

    r->upstream->peer.data = w;
    r->upstream->peer.get = wrap_get;
    r->upstream->peer.free = wrap_free;

    w->notify = r->upstream->peer.notify;
    if (w->notify) {
        r->upstream->peer.notify = wrap_notify;
    }

#if (NGX_HTTP_SSL)
    w->set_session = r->upstream->peer.set_session;
    w->save_session = r->upstream->peer.save_session;
    r->upstream->peer.set_session = wrap_set_session;
    r->upstream->peer.save_session = wrap_save_session;
#endif

    ngx_log_error(NGX_LOG_NOTICE, r->connection->log, 0, "test_wrap: init");

    return NGX_OK;
}


static ngx_int_t
wrap_postconfiguration(ngx_conf_t *cf)
{
    ngx_uint_t                       i;
    ngx_http_upstream_srv_conf_t   **uscfp;
    ngx_http_upstream_main_conf_t   *umcf;

    umcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_upstream_module);
    uscfp = umcf->upstreams.elts;
    wrap_count = 0;

    for (i = 0; i < umcf->upstreams.nelts; i++) {

        if (uscfp[i]->peer.init == NULL || uscfp[i]->srv_conf == NULL) {
            continue;
        }

        if (wrap_count == WRAP_MAX_UPSTREAMS) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "test_wrap: more than %d upstreams",
                               WRAP_MAX_UPSTREAMS);
            return NGX_ERROR;
        }

        wrap_originals[wrap_count].uscf = uscfp[i];
        wrap_originals[wrap_count].init = uscfp[i]->peer.init;
        wrap_count++;

        uscfp[i]->peer.init = wrap_init_peer;
    }

    return NGX_OK;
}


ngx_module_t  *ngx_modules[] = {
    &ngx_http_generation_retry_test_wrap_module,
    NULL
};

char  *ngx_module_names[] = {
    "ngx_http_generation_retry_test_wrap_module",
    NULL
};

char  *ngx_module_order[] = {
    NULL
};
